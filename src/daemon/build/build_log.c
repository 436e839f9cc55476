/* build_log.c -- a build's record (<state>/builds/<id>/build.json, rewritten whole at each
 * change) and its event log (<id>/events: "type\tjson\n" records appended, read back from any
 * record's end as server-sent events), loaded again at the daemon's start. */
#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_int.h"
#include "cleanup.h"
#include "log.h"
#include "vmm/proc_async.h"

static void builds_dir(const struct spaced *d, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "%s/builds", d->cfg.state_dir);
}

int build_log_open(struct build *b, bool create, space_err *err)
{
	char path[PATH_MAX];
	struct stat st;

	if (create) {
		char top[PATH_MAX];

		builds_dir(b->d, top);
		if (mkdir(top, 0700) < 0 && errno != EEXIST)
			return err_sys(err, errno, "creating %s", top);
		if (mkdir(b->dir, 0700) < 0)
			return err_sys(err, errno, "creating %s", b->dir);
	}
	snprintf(path, sizeof(path), "%s/events", b->dir);
	b->logfd = open(path, O_RDWR | O_APPEND | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), 0600);
	if (b->logfd < 0)
		return err_sys(err, errno, "opening %s", path);
	if (fstat(b->logfd, &st) == 0)
		b->log_len = (uint64_t)st.st_size;
	return 0;
}

static void wake(struct build *b)
{
	struct build_watch *w = b->watches, *next;

	/* A watcher fires once: it reads, then watches again if it wants more. */
	b->watches = NULL;
	for (; w; w = next) {
		next = w->next;
		w->next = NULL;
		w->fn(w->arg);
	}
}

void build_log_add(struct build *b, const char *type, json_t *data)
{
	char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
	struct evbuffer *rec = evbuffer_new();

	json_decref(data);
	if (text && rec && b->logfd >= 0 && evbuffer_add_printf(rec, "%s\t%s\n", type, text) > 0) {
		size_t n = evbuffer_get_length(rec);
		ssize_t w = write(b->logfd, evbuffer_pullup(rec, (ev_ssize_t)n), n);

		if (w == (ssize_t)n)
			b->log_len += n;
		else if (w >= 0 && ftruncate(b->logfd, (off_t)b->log_len) == 0)
			log_warn("build %s: its log is full (a short write); a record was left out", b->id);
		else
			log_warn("build %s: writing its log: %s", b->id, strerror(errno));
	}
	free(text);
	if (rec)
		evbuffer_free(rec);
	wake(b);
}

/* Valid UTF-8 kept; each byte of anything else becomes U+FFFD. */
static size_t utf8_clean(const unsigned char *s, size_t n, char *out)
{
	size_t i = 0, o = 0;

	while (i < n) {
		unsigned c = s[i];
		size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
		bool ok = len > 0 && i + len <= n && !(c == 0xc0 || c == 0xc1 || c > 0xf4);

		for (size_t k = 1; ok && k < len; k++)
			ok = (s[i + k] & 0xc0) == 0x80;
		if (ok && len == 3 && ((c == 0xe0 && s[i + 1] < 0xa0) || (c == 0xed && s[i + 1] >= 0xa0)))
			ok = false;
		if (ok && len == 4 && ((c == 0xf0 && s[i + 1] < 0x90) || (c == 0xf4 && s[i + 1] >= 0x90)))
			ok = false;
		if (ok && c == 0)
			ok = false; /* jansson takes NUL, but no log line needs one */
		if (!ok) {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
			continue;
		}
		memcpy(out + o, s + i, len);
		o += len;
		i += len;
	}
	return o;
}

void build_log_output(struct build *b, size_t step, const char *bytes, size_t len)
{
	_cleanup_free_ char *clean = NULL;

	while (len) {
		size_t n = len > BUILD_DATA_MAX ? BUILD_DATA_MAX : len, m;

		if (b->log_capped)
			return;
		if (b->log_len + n > BUILD_LOG_MAX) {
			b->log_capped = true;
			build_log_add(b, "log", json_pack("{s:I,s:s}", "step", (json_int_t)step, "data",
							  "\n[space: the build's log is over 32 MiB; the rest of its output is left out]\n"));
			return;
		}
		if (!clean && !(clean = malloc(BUILD_DATA_MAX * 3)))
			return;
		m = utf8_clean((const unsigned char *)bytes, n, clean);
		build_log_add(b, "log", json_pack("{s:I,s:s%}", "step", (json_int_t)step, "data", clean, m));
		bytes += n;
		len -= n;
	}
}

uint64_t build_log_length(const struct build *b)
{
	return b->log_len;
}

void build_log_watch(struct build *b, struct build_watch *w)
{
	build_log_unwatch(b, w);
	w->next = b->watches;
	b->watches = w;
}

void build_log_unwatch(struct build *b, struct build_watch *w)
{
	for (struct build_watch **pp = &b->watches; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			w->next = NULL;
			return;
		}
}

int build_log_read(struct build *b, uint64_t *off, size_t max, void *evbuffer_out, space_err *err)
{
	struct evbuffer *out = evbuffer_out;
	_cleanup_free_ char *buf = NULL;
	size_t cap = max + BUILD_DATA_MAX * 3 + 256;
	char c;

	if (*off > b->log_len)
		return err_set(err, EINVAL, "offset %llu is past the log's end (%llu bytes)", (unsigned long long)*off,
			       (unsigned long long)b->log_len);
	if (*off > 0 && (pread(b->logfd, &c, 1, (off_t)*off - 1) != 1 || c != '\n'))
		return err_set(err, EINVAL, "offset %llu is not where an event ends", (unsigned long long)*off);
	if (*off == b->log_len)
		return 0;
	if (!(buf = malloc(cap)))
		return err_set(err, ENOMEM, "out of memory");
	ssize_t n = pread(b->logfd, buf, cap, (off_t)*off);
	if (n < 0)
		return err_sys(err, errno, "reading build %s's log", b->id);
	size_t at = 0;
	while (at < (size_t)n) {
		char *nl = memchr(buf + at, '\n', (size_t)n - at), *tab;

		if (!nl)
			break;
		tab = memchr(buf + at, '\t', (size_t)(nl - (buf + at)));
		if (tab) {
			uint64_t end = *off + (uint64_t)(nl + 1 - buf);

			evbuffer_add_printf(out, "id: %llu\nevent: %.*s\ndata: ", (unsigned long long)end,
					    (int)(tab - (buf + at)), buf + at);
			evbuffer_add(out, tab + 1, (size_t)(nl - tab - 1));
			evbuffer_add(out, "\n\n", 2);
		}
		at = (size_t)(nl + 1 - buf);
		if (evbuffer_get_length(out) >= max)
			break;
	}
	*off += at;
	return 0;
}

/* ---- the record ---- */

static json_t *steps_record(const struct build *b)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < b->rc.nsteps; i++) {
		const struct bstep *s = &b->steps[i];

		json_array_append_new(a, json_pack("{s:s,s:b,s:I,s:I,s:s}", "state", bstep_state_name(s->state), "cached",
						   s->cached, "started_ms", (json_int_t)s->started_ms, "duration_ms",
						   (json_int_t)s->duration_ms, "key", s->key));
	}
	return a;
}

void build_save(struct build *b)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	json_t *rec = json_pack("{s:s,s:O,s:s,s:s,s:s,s:s,s:s,s:o,s:I,s:I}", "id", b->id, "request", b->request,
				"state", build_state_name(b->state), "error", b->error, "digest", b->digest,
				"operation", b->op.id, "base", b->base.digest, "steps", steps_record(b),
				"created_ms", (json_int_t)b->created_ms, "finished_ms", (json_int_t)b->finished_ms);

	snprintf(path, sizeof(path), "%s/build.json", b->dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (!rec || json_dump_file(rec, tmp, JSON_COMPACT) < 0 || rename(tmp, path) < 0) {
		log_warn("build %s: its record could not be written (%s)", b->id, strerror(errno));
		unlink(tmp);
	}
	json_decref(rec);
}

static struct build *load_one(struct spaced *d, const char *dir, const char *id)
{
	char path[PATH_MAX];
	json_t *rec, *steps, *v;
	json_error_t jerr;
	space_err err = { 0 };
	struct build *b;
	size_t i;

	snprintf(path, sizeof(path), "%s/%s/build.json", dir, id);
	if (!(rec = json_load_file(path, 0, &jerr)))
		return NULL;
	b = calloc(1, sizeof(*b));
	if (!b || recipe_parse(json_object_get(rec, "request"), &b->rc, &err) < 0) {
		log_warn("build %s: its record does not parse (%s); left out", id, err.msg);
		json_decref(rec);
		if (b)
			recipe_free(&b->rc);
		free(b);
		return NULL;
	}
	b->d = d;
	b->logfd = -1;
	snprintf(b->id, sizeof(b->id), "%s", id);
	snprintf(b->dir, sizeof(b->dir), "%s/%s", dir, id);
	b->request = json_incref(json_object_get(rec, "request"));
	v = json_object_get(rec, "state");
	b->state = json_is_string(v) && strcmp(json_string_value(v), "succeeded") == 0 ? BUILD_SUCCEEDED
		   : json_is_string(v) && strcmp(json_string_value(v), "failed") == 0  ? BUILD_FAILED
										       : BUILD_RUNNING;
	snprintf(b->error, sizeof(b->error), "%s", json_string_value(json_object_get(rec, "error")) ?: "");
	snprintf(b->digest, sizeof(b->digest), "%s", json_string_value(json_object_get(rec, "digest")) ?: "");
	snprintf(b->op.id, sizeof(b->op.id), "%s", json_string_value(json_object_get(rec, "operation")) ?: "");
	b->op.kind = OPK_BUILD;
	b->op.state = b->state == BUILD_RUNNING ? OP_RUNNING : b->state == BUILD_SUCCEEDED ? OP_SUCCEEDED : OP_FAILED;
	snprintf(b->base.digest, sizeof(b->base.digest), "%s", json_string_value(json_object_get(rec, "base")) ?: "");
	b->created_ms = json_integer_value(json_object_get(rec, "created_ms"));
	b->finished_ms = json_integer_value(json_object_get(rec, "finished_ms"));
	b->op.created_ms = b->created_ms;
	b->steps = calloc(b->rc.nsteps ? b->rc.nsteps : 1, sizeof(*b->steps));
	steps = json_object_get(rec, "steps");
	for (i = 0; b->steps && i < b->rc.nsteps; i++) {
		json_t *s = json_array_get(steps, i);
		const char *st = json_string_value(json_object_get(s, "state")) ?: "pending";

		b->steps[i].state = strcmp(st, "done") == 0 ? BSTEP_DONE : strcmp(st, "failed") == 0 ? BSTEP_FAILED
							   : strcmp(st, "running") == 0	  ? BSTEP_RUNNING
											  : BSTEP_PENDING;
		b->steps[i].cached = json_is_true(json_object_get(s, "cached"));
		b->steps[i].started_ms = json_integer_value(json_object_get(s, "started_ms"));
		b->steps[i].duration_ms = json_integer_value(json_object_get(s, "duration_ms"));
		snprintf(b->steps[i].key, sizeof(b->steps[i].key), "%s",
			 json_string_value(json_object_get(s, "key")) ?: "");
	}
	json_decref(rec);
	if (!b->steps || build_log_open(b, false, &err) < 0) {
		log_warn("build %s: %s; left out", id, b->steps ? err.msg : "out of memory");
		build_free(b);
		return NULL;
	}
	return b;
}

void builds_load(struct spaced *d)
{
	char dir[PATH_MAX];
	_cleanup_closedir_ DIR *dh = NULL;
	struct dirent *de;

	builds_dir(d, dir);
	if (!(dh = opendir(dir)))
		return;
	while ((de = readdir(dh))) {
		struct build *b;

		if (!id_valid(de->d_name, "bd-") || !(b = load_one(d, dir, de->d_name)))
			continue;
		b->next = d->builds;
		d->builds = b;
		if (b->state == BUILD_RUNNING || b->state == BUILD_PENDING) {
			/* Its builder VM (if any) is reaped by sandbox_tick: it has no build now. */
			build_fail(b, "the daemon restarted while the build ran; build it again (the steps done are cached)");
		}
	}
}

void build_free(struct build *b)
{
	if (b->waiter)
		op_wait_cancel(b->waiter);
	build_exec_cancel(b);
	build_result_cancel(b);
	if (b->logfd >= 0)
		close(b->logfd);
	recipe_free(&b->rc);
	template_rec_clear(&b->base);
	op_rec_clear(&b->op);
	json_decref(b->request);
	free(b->steps);
	free(b);
}

void builds_free(struct spaced *d)
{
	while (d->builds) {
		struct build *b = d->builds;

		d->builds = b->next;
		/* After sandbox_shutdown: the sessions went with their sandboxes (a command's
		 * session is gone: cancelling it frees only what is ours); the builder VM runs on
		 * and is reaped at the next start, where its build fails. */
		build_free(b);
	}
}
