/* audit.c -- the gateway's decisions as JSON lines in <audit-dir>/audit.log, rotated to
 * audit.log.1 past GW_AUDIT_ROTATE (egress.md "Audit"). Records carry header names, never
 * values. A failing write is logged (rate-limited) and the record dropped: auditing never
 * stops the relay. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "gw.h"
#include "log.h"

static int open_log(struct gw_audit *a)
{
	struct stat st;

	a->fd = openat(a->dirfd, "audit.log", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
	if (a->fd < 0)
		return -1;
	/* Opened as root at start: made the gateway's, like the files it makes once it runs as
	 * its own uid (rotation), so the whole log belongs to one uid. */
	if (a->uid != (uid_t)-1 && geteuid() == 0 && fchown(a->fd, a->uid, a->gid) < 0) {
		int e = errno;
		close(a->fd);
		a->fd = -1;
		errno = e;
		return -1;
	}
	a->size = fstat(a->fd, &st) == 0 ? st.st_size : 0;
	return 0;
}

int gw_audit_open(struct gw_audit *a, const char *dir, const char *sandbox, uid_t uid, gid_t gid,
		  space_err *err)
{
	a->sandbox = sandbox;
	a->uid = uid;
	a->gid = gid;
	a->fd = -1;
	a->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (a->dirfd < 0)
		return err_sys(err, errno, "audit dir %s", dir);
	if (open_log(a) < 0) {
		err_sys(err, errno, "%s/audit.log", dir);
		close(a->dirfd);
		a->dirfd = -1;
		return -1;
	}
	return 0;
}

void gw_audit_close(struct gw_audit *a)
{
	if (a->fd >= 0)
		close(a->fd);
	if (a->dirfd >= 0)
		close(a->dirfd);
	a->fd = a->dirfd = -1;
}

static void rotate(struct gw_audit *a)
{
	if (renameat(a->dirfd, "audit.log", a->dirfd, "audit.log.1") < 0)
		log_warn("audit: rotating: %s", strerror(errno));
	close(a->fd);
	if (open_log(a) < 0)
		log_warn("audit: reopening: %s", strerror(errno));
}

static void rfc3339(char *out, size_t len)
{
	struct timeval tv;
	struct tm tm;

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	snprintf(out, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(tv.tv_usec / 1000));
}

static json_t *record_json(const struct gw *g, const struct gw_audit_rec *r)
{
	char ts[40], dst[32];
	json_t *o, *inj;

	rfc3339(ts, sizeof(ts));
	o = json_pack("{s:s, s:s, s:s, s:s, s:s}", "time", ts, "sandbox", g->sandbox ? g->sandbox : "",
		      "proto", r->proto, "verdict", r->allow ? "allow" : "deny", "reason",
		      r->reason ? r->reason : "");
	if (!o)
		return NULL;
	if (r->addr || r->port) {
		snprintf(dst, sizeof(dst), "%u.%u.%u.%u:%u", r->addr >> 24, (r->addr >> 16) & 255,
			 (r->addr >> 8) & 255, r->addr & 255, r->port);
		json_object_set_new(o, "dst", json_string(dst));
	}
	if (r->name && r->name[0])
		json_object_set_new(o, "name", json_string(r->name));
	if (r->bytes_out || r->bytes_in || strcmp(r->proto, "dns")) {
		json_object_set_new(o, "bytes_out", json_integer((json_int_t)r->bytes_out));
		json_object_set_new(o, "bytes_in", json_integer((json_int_t)r->bytes_in));
	}
	if (r->n_injected) {
		inj = json_array();
		for (int i = 0; inj && i < r->n_injected; i++)
			json_array_append_new(inj, json_string(r->injected[i]));
		json_object_set_new(o, "injected", inj);
	}
	return o;
}

void gw_audit(struct gw *g, const struct gw_audit_rec *r)
{
	static struct log_limit limit;
	struct gw_audit *a = &g->audit;
	json_t *o = record_json(g, r);
	char *line = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	size_t n = line ? strlen(line) : 0;
	uint64_t dropped;
	ssize_t w = -1;

	json_decref(o);
	if (line && a->fd >= 0) {
		line[n] = '\n'; /* replaces the NUL: written with its length */
		w = write(a->fd, line, n + 1);
	}
	if (w == (ssize_t)(n + 1)) {
		a->size += w;
		if (a->size > GW_AUDIT_ROTATE)
			rotate(a);
	} else if (log_limit_take(&limit, (int64_t)time(NULL) * 1000, 1, 5, &dropped)) {
		log_warn("audit: record not written: %s", line ? strerror(errno) : "out of memory");
	}
	free(line);
}
