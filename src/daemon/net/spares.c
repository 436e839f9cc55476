/* spares.c -- network namespaces made before any create asks for one: a spare is a whole
 * sandbox netns (lo, the TAP, its address, the ruleset: nothing in it depends on the sandbox),
 * made by the same `space-gw --make-netns` child under the name space-<tag>-spare-<n>. A launch
 * takes one by bind-mounting it onto its own netns path and dropping the spare's name: tens of
 * microseconds instead of the child's ~7 ms (and its nft run) on the start's critical path.
 * The daemon keeps --net-spares of them ready, refilling after each take once no start is in
 * flight (the child and its nft run would compete with that start's QEMU restore for the same
 * cores and take back what the spare saved); spares outlive nothing: the start-up sweep
 * removes any a previous run left. */
#include "net.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

/* Children making spares at once: each is a process running nft, competing with VMs. */
#define SPARES_MAKING_MAX 2
/* After a spare could not be made, the next try waits this long. */
#define SPARES_RETRY_MS 10000
/* While starts are in flight a refill looks again this often, and waits at most this long. */
#define SPARES_RECHECK_MS 20
#define SPARES_POSTPONE_MAX_MS 2000
#ifndef NSFS_MAGIC
#define NSFS_MAGIC 0x6e736673
#endif

struct spare {
	struct net_spares *set;
	char name[32];          /* "spare-<n>": the id part of its netns path */
	struct net_ns_op *op;   /* being made (NULL: ready) */
	struct spare *next;
};

struct net_spares {
	struct spaced *d;
	int want;
	unsigned seq;
	struct spare *list;
	struct event *refill;   /* a later turn of the loop makes what is missing */
	int64_t retry_at_ms;    /* monotonic; 0: no failure to wait out */
	bool (*busy)(struct spaced *d); /* a start is in flight: refills wait */
	int64_t short_since_ms; /* monotonic: since when a refill has waited (0: none waits) */
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void unlink_spare(struct net_spares *s, struct spare *sp)
{
	for (struct spare **pp = &s->list; *pp; pp = &(*pp)->next) {
		if (*pp == sp) {
			*pp = sp->next;
			return;
		}
	}
}

static void made(const space_err *err, void *arg)
{
	struct spare *sp = arg;
	struct net_spares *s = sp->set;

	sp->op = NULL;
	if (!err)
		return;
	log_warn("a spare network namespace: %s (trying again in %d s)", err->msg, SPARES_RETRY_MS / 1000);
	s->retry_at_ms = mono_ms() + SPARES_RETRY_MS;
	unlink_spare(s, sp);
	free(sp);
}

static void make_one(struct net_spares *s)
{
	struct spare *sp = calloc(1, sizeof(*sp));
	space_err err = { 0 };

	if (!sp)
		return;
	sp->set = s;
	snprintf(sp->name, sizeof(sp->name), "spare-%u", ++s->seq);
	int r = net_ns_begin(s->d, sp->name, NULL, made, sp, &sp->op, &err);
	if (r < 0) {
		log_warn("a spare network namespace: %s", err.msg);
		s->retry_at_ms = mono_ms() + SPARES_RETRY_MS;
		free(sp);
		return;
	}
	sp->next = s->list;
	s->list = sp;
}

/* True (and the refill timer armed) while a start is in flight, for at most
 * SPARES_POSTPONE_MAX_MS: a stream of starts with no gap still gets its spares. */
static bool postpone(struct net_spares *s)
{
	int64_t now = mono_ms();

	if (!s->busy || !s->busy(s->d)) {
		s->short_since_ms = 0;
		return false;
	}
	if (!s->short_since_ms)
		s->short_since_ms = now;
	if (now - s->short_since_ms >= SPARES_POSTPONE_MAX_MS) {
		s->short_since_ms = 0;
		return false;
	}
	struct timeval tv = { 0, SPARES_RECHECK_MS * 1000 };
	evtimer_add(s->refill, &tv);
	return true;
}

void net_spares_fill(struct net_spares *s)
{
	int have = 0, making = 0;

	if (!s || (s->retry_at_ms && mono_ms() < s->retry_at_ms))
		return;
	s->retry_at_ms = 0;
	for (struct spare *sp = s->list; sp; sp = sp->next) {
		have++;
		making += sp->op != NULL;
	}
	if (have >= s->want || making >= SPARES_MAKING_MAX || postpone(s))
		return;
	while (have < s->want && making < SPARES_MAKING_MAX && !s->retry_at_ms) {
		make_one(s);
		have++;
		making++;
	}
}

static void refill_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	net_spares_fill(arg);
}

struct net_spares *net_spares_new(struct spaced *d, int want, bool (*busy)(struct spaced *d))
{
	struct net_spares *s;

	if (want <= 0)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->d = d;
	s->want = want;
	s->busy = busy;
	s->refill = evtimer_new(d->base, refill_cb, s);
	if (!s->refill || event_priority_set(s->refill, SPACED_PRIO_BULK) < 0) {
		net_spares_free(s);
		return NULL;
	}
	return s;
}

static bool is_netns(const char *path)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && sf.f_type == NSFS_MAGIC;
}

/* The spare's netns onto dst (an empty file made here, as ip netns does it), then its own
 * name dropped: the namespace lives on through dst's mount. */
static int move_ns(const char *src, const char *dst)
{
	if (unlink(dst) < 0 && errno != ENOENT)
		return -1;
	int fd = open(dst, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	close(fd);
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0) {
		int e = errno;
		unlink(dst);
		errno = e;
		return -1;
	}
	umount2(src, MNT_DETACH);
	unlink(src);
	return 0;
}

bool net_spares_take(struct net_spares *s, const char *sb_id)
{
	char src[PATH_MAX], dst[PATH_MAX];
	bool taken = false;

	if (!s)
		return false;
	net_ns_path(s->d, sb_id, dst);
	if (is_netns(dst))
		return false; /* it has its own already */
	for (struct spare *sp = s->list; sp; sp = sp->next) {
		if (sp->op)
			continue;
		net_ns_path(s->d, sp->name, src);
		unlink_spare(s, sp);
		if (is_netns(src) && move_ns(src, dst) == 0) {
			log_info("sandbox %s: network namespace %s taken from %s", sb_id, dst, sp->name);
			taken = true;
		} else {
			log_warn("sandbox %s: spare network namespace %s: %s", sb_id, src, strerror(errno));
			umount2(src, MNT_DETACH);
			unlink(src);
		}
		free(sp);
		break;
	}
	/* The next one is made from a later turn, once no start is in flight: this one goes first. */
	struct timeval now = { 0, 0 };
	evtimer_add(s->refill, &now);
	return taken;
}

void net_spares_free(struct net_spares *s)
{
	char path[PATH_MAX];

	if (!s)
		return;
	while (s->list) {
		struct spare *sp = s->list;

		s->list = sp->next;
		if (sp->op) {
			net_ns_cancel(sp->op);
		} else {
			net_ns_path(s->d, sp->name, path);
			umount2(path, MNT_DETACH);
			unlink(path);
		}
		free(sp);
	}
	if (s->refill)
		event_free(s->refill);
	free(s);
}
