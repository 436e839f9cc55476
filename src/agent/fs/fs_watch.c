/* fs_watch.c -- `watch PATH [-r]`: inotify events as JSON lines, until a signal or PATH's end.
 *
 * One inotify watch per directory (PATH, and with -r every subdirectory at most
 * FS_TREE_MAX_DEPTH levels down; subdirectories are watched with IN_DONT_FOLLOW, and the
 * scan opens them with O_NOFOLLOW, so a symlink never leads the watch elsewhere).  Mapping:
 * IN_CREATE and IN_MOVED_TO -> "create", IN_MODIFY -> "write" (repeats of the same file's
 * write within one batch are folded), IN_DELETE -> "remove", IN_MOVED_FROM -> "rename",
 * IN_ATTRIB -> "chmod", IN_Q_OVERFLOW -> {"type":"overflow"}.
 *
 * With -r, a directory created later is watched as soon as its event is seen, and scanned:
 * what was created in it before its watch existed is reported as "create" then (so an entry
 * can be reported twice, never missed).  A directory renamed inside the tree keeps its
 * watches (their paths are updated when the IN_MOVED_FROM / IN_MOVED_TO pair is seen); one
 * moved out of the tree loses them; one moved in gets watched (its contents are not
 * reported).  When the inotify watch limit (or our own, WATCH_MAX_DIRS) is reached, further
 * subdirectories are not watched (PATH itself failing is ENOSPC).
 *
 * Each batch of events read from inotify is written with one write, right away.  SIGTERM and
 * SIGINT (taken through a signalfd) end the watch with exit 0, and so does PATH being removed
 * or unmounted (IN_DELETE_SELF / IN_IGNORED on PATH's watch; a removal is reported first as a
 * "remove" event for PATH). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fs.h"

#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | \
		    IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)
#define WATCH_BUF (64 * 1024)
#define WATCH_MAX_DIRS 65536 /* live watches held at once */

struct wdir {
	int wd;
	unsigned depth;
	char *path;
};

struct watcher {
	int ifd;
	bool recursive;
	int root_wd;
	struct wdir *dirs; /* the live watches, sorted by wd (new wds are mostly the largest) */
	size_t ndirs, capdirs;
	struct fs_out *o;
	struct jbuf b;
	char *root;
	/* an IN_MOVED_FROM of a directory waiting for its IN_MOVED_TO */
	bool pending;
	uint32_t pending_cookie;
	char *pending_path;
	/* the last "write" emitted in this batch, to fold repeats */
	int last_wd;
	char last_name[256];
	bool last_valid;
};

static void emit(struct watcher *w, const char *type, const char *path, size_t plen, bool dir)
{
	jb_reset(&w->b);
	jb_begin(&w->b);
	jb_kcstr(&w->b, "type", type);
	if (path) {
		jb_kstr(&w->b, "path", path, plen);
		jb_kbool(&w->b, "dir", dir);
	}
	jb_end(&w->b);
	jb_raw(&w->b, "\n", 1);
	if (!w->b.oom)
		fs_out_put(w->o, w->b.p, w->b.len); /* errors show at the flush */
}

/* Index of wd in w->dirs, or where it would go (*found false). */
static size_t find_dir(const struct watcher *w, int wd, bool *found)
{
	size_t lo = 0, hi = w->ndirs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (w->dirs[mid].wd < wd)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < w->ndirs && w->dirs[lo].wd == wd;
	return lo;
}

static int set_dir(struct watcher *w, int wd, const char *path, unsigned depth)
{
	bool found;
	size_t i = find_dir(w, wd, &found);
	char *p = strdup(path);

	if (!p)
		return -1;
	if (found) { /* the same directory again (inotify hands out its wd once) */
		free(w->dirs[i].path);
		w->dirs[i].path = p;
		w->dirs[i].depth = depth;
		return 0;
	}
	if (w->ndirs >= WATCH_MAX_DIRS) {
		free(p);
		return -1;
	}
	if (w->ndirs == w->capdirs) {
		size_t n = w->capdirs ? w->capdirs * 2 : 64;
		struct wdir *nd = realloc(w->dirs, n * sizeof(*nd));

		if (!nd) {
			free(p);
			return -1;
		}
		w->dirs = nd;
		w->capdirs = n;
	}
	memmove(w->dirs + i + 1, w->dirs + i, (w->ndirs - i) * sizeof(*w->dirs));
	w->dirs[i] = (struct wdir){ wd, depth, p };
	w->ndirs++;
	return 0;
}

static void del_dir(struct watcher *w, int wd)
{
	bool found;
	size_t i = find_dir(w, wd, &found);

	if (!found)
		return;
	free(w->dirs[i].path);
	memmove(w->dirs + i, w->dirs + i + 1, (w->ndirs - i - 1) * sizeof(*w->dirs));
	w->ndirs--;
}

static struct wdir *get_dir(struct watcher *w, int wd)
{
	bool found;
	size_t i = find_dir(w, wd, &found);

	return found ? &w->dirs[i] : NULL;
}

/* Watch the directory path (and, with -r, its subdirectories).  synth: report what is in it
 * as "create" (a directory that was just created).  -1 only when the watch on path itself
 * failed (errno). */
static int add_tree(struct watcher *w, const char *path, unsigned depth, bool synth)
{
	_cleanup_free_ char **names = NULL;
	_cleanup_free_ char *child = NULL;
	size_t plen = strlen(path);
	ssize_t n, i;
	int wd, fd;

	wd = inotify_add_watch(w->ifd, path, WATCH_MASK | (depth ? IN_DONT_FOLLOW : 0));
	if (wd < 0)
		return -1;
	if (set_dir(w, wd, path, depth) < 0) {
		inotify_rm_watch(w->ifd, wd);
		errno = ENOSPC;
		return -1;
	}
	if (depth == 0)
		w->root_wd = wd;
	if (!w->recursive && !synth)
		return 0;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK | (depth ? O_NOFOLLOW : 0));
	if (fd < 0)
		return 0;
	n = fs_dir_names(fd, &names);
	if (n < 0) {
		close(fd);
		return 0;
	}
	child = malloc(FS_PATH_MAX + 1);
	if (!child) {
		close(fd);
		return 0;
	}
	for (i = 0; i < n; i++) {
		size_t nl = strlen(names[i]), cl = plen;
		struct stat st;

		if (fstatat(fd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (plen + 1 + nl > FS_PATH_MAX)
			continue;
		memcpy(child, path, plen);
		if (!(plen == 1 && path[0] == '/'))
			child[cl++] = '/';
		memcpy(child + cl, names[i], nl + 1);
		cl += nl;
		if (synth)
			emit(w, "create", child, cl, S_ISDIR(st.st_mode));
		if (w->recursive && S_ISDIR(st.st_mode) && depth < FS_TREE_MAX_DEPTH)
			add_tree(w, child, depth + 1, synth);
	}
	close(fd);
	return 0;
}

static bool under(const char *p, const char *prefix, size_t pl)
{
	return strncmp(p, prefix, pl) == 0 && (p[pl] == '\0' || p[pl] == '/');
}

/* A directory moved out of the tree: stop watching it and what is below it. */
static void drop_pending(struct watcher *w)
{
	size_t i, pl;

	if (!w->pending)
		return;
	w->pending = false;
	pl = strlen(w->pending_path);
	for (i = 0; i < w->ndirs; i++)
		if (w->dirs[i].wd != w->root_wd && under(w->dirs[i].path, w->pending_path, pl))
			inotify_rm_watch(w->ifd, w->dirs[i].wd); /* its IN_IGNORED frees the entry */
	free(w->pending_path);
	w->pending_path = NULL;
}

/* The pending directory arrived at to (depth: its new depth): rewrite the watched paths
 * (and depths) below it. */
static void move_pending(struct watcher *w, const char *to, unsigned depth)
{
	size_t i, pl = strlen(w->pending_path), tl = strlen(to);
	int delta = 0;

	for (i = 0; i < w->ndirs; i++)
		if (strcmp(w->dirs[i].path, w->pending_path) == 0)
			delta = (int)depth - (int)w->dirs[i].depth;
	for (i = 0; i < w->ndirs; i++) {
		char *p = w->dirs[i].path, *np;
		size_t rest;

		if (w->dirs[i].wd == w->root_wd || !under(p, w->pending_path, pl))
			continue;
		rest = strlen(p + pl);
		np = malloc(tl + rest + 1);
		if (!np)
			continue;
		memcpy(np, to, tl);
		memcpy(np + tl, p + pl, rest + 1);
		free(p);
		w->dirs[i].path = np;
		w->dirs[i].depth = (unsigned)((int)w->dirs[i].depth + delta);
	}
	w->pending = false;
	free(w->pending_path);
	w->pending_path = NULL;
}

/* One inotify event; returns 1 when the watch is over (PATH gone). */
static int handle(struct watcher *w, const struct inotify_event *ev, char *full)
{
	struct wdir *d;
	size_t nl, fl;
	bool isdir = ev->mask & IN_ISDIR;

	if (ev->mask & IN_Q_OVERFLOW) {
		emit(w, "overflow", NULL, 0, false);
		return 0;
	}
	if (w->pending && !((ev->mask & IN_MOVED_TO) && ev->cookie == w->pending_cookie))
		drop_pending(w);
	if (ev->mask & IN_IGNORED) {
		if (ev->wd == w->root_wd)
			return 1;
		del_dir(w, ev->wd);
		return 0;
	}
	d = get_dir(w, ev->wd);
	if (!d)
		return 0;
	if (ev->mask & IN_DELETE_SELF) {
		if (ev->wd == w->root_wd) {
			emit(w, "remove", w->root, strlen(w->root), true);
			return 1;
		}
		return 0;
	}
	nl = ev->len ? strnlen(ev->name, ev->len) : 0;
	if (nl == 0) {
		/* The watched directory itself: reported by its parent's watch, except PATH. */
		if ((ev->mask & IN_ATTRIB) && ev->wd == w->root_wd)
			emit(w, "chmod", w->root, strlen(w->root), true);
		return 0;
	}
	fl = strlen(d->path);
	if (fl + 1 + nl > FS_PATH_MAX)
		return 0;
	memcpy(full, d->path, fl);
	if (!(fl == 1 && full[0] == '/'))
		full[fl++] = '/';
	memcpy(full + fl, ev->name, nl);
	fl += nl;
	full[fl] = '\0';
	if (!(ev->mask & IN_MODIFY))
		w->last_valid = false;

	if (ev->mask & IN_CREATE) {
		emit(w, "create", full, fl, isdir);
		if (isdir && w->recursive && d->depth < FS_TREE_MAX_DEPTH)
			add_tree(w, full, d->depth + 1, true);
	} else if (ev->mask & IN_MODIFY) {
		if (w->last_valid && w->last_wd == ev->wd && strcmp(w->last_name, ev->name) == 0)
			return 0;
		emit(w, "write", full, fl, isdir);
		w->last_valid = nl < sizeof(w->last_name);
		w->last_wd = ev->wd;
		if (w->last_valid)
			memcpy(w->last_name, ev->name, nl + 1);
	} else if (ev->mask & IN_ATTRIB) {
		emit(w, "chmod", full, fl, isdir);
	} else if (ev->mask & IN_DELETE) {
		emit(w, "remove", full, fl, isdir);
	} else if (ev->mask & IN_MOVED_FROM) {
		emit(w, "rename", full, fl, isdir);
		if (isdir && w->recursive) {
			w->pending_path = strdup(full);
			w->pending = w->pending_path != NULL;
			w->pending_cookie = ev->cookie;
		}
	} else if (ev->mask & IN_MOVED_TO) {
		emit(w, "create", full, fl, isdir);
		if (isdir && w->recursive) {
			if (w->pending && ev->cookie == w->pending_cookie)
				move_pending(w, full, d->depth + 1);
			else if (d->depth < FS_TREE_MAX_DEPTH)
				add_tree(w, full, d->depth + 1, false);
		}
	}
	return 0;
}

static void watcher_free(struct watcher *w)
{
	size_t i;

	for (i = 0; i < w->ndirs; i++)
		free(w->dirs[i].path);
	free(w->dirs);
	free(w->pending_path);
	free(w->root);
	jb_free(&w->b);
}

int fs_op_watch(struct fs_out *o, const struct fs_args *a, struct fs_fail *f)
{
	const char *path = a->pos[0];
	struct watcher w = { .o = o, .recursive = a->r, .root_wd = -1 };
	_cleanup_close_ int sfd = -1;
	_cleanup_free_ char *buf = NULL, *full = NULL;
	struct stat st;
	sigset_t mask;
	size_t rl;
	int rc = -1;

	if (fs_check_path(f, path) < 0)
		return -1;
	if (stat(path, &st) < 0)
		return fs_failsys(f, errno, path, "watch %s", path);
	if (!S_ISDIR(st.st_mode))
		return fs_fail(f, ENOTDIR, path, "watch %s: not a directory", path);

	/* The end signals arrive on a descriptor, polled with inotify's. */
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return fs_failsys(f, errno, path, "watch: sigprocmask");
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		return fs_failsys(f, errno, path, "watch: signalfd");

	jb_init(&w.b);
	w.root = strdup(path);
	buf = malloc(WATCH_BUF);
	full = malloc(FS_PATH_MAX + 1);
	if (!w.root || !buf || !full) {
		fs_fail(f, ENOMEM, path, "watch: out of memory");
		goto out;
	}
	rl = strlen(w.root);
	while (rl > 1 && w.root[rl - 1] == '/')
		w.root[--rl] = '\0';
	w.ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (w.ifd < 0) {
		fs_failsys(f, errno, path, "watch: inotify_init1");
		goto out;
	}
	if (add_tree(&w, w.root, 0, false) < 0) {
		fs_failsys(f, errno, path, "watch %s", path);
		goto out_ifd;
	}
	jb_reset(&w.b);
	jb_begin(&w.b);
	jb_kcstr(&w.b, "path", path);
	jb_end(&w.b);
	if (fs_header(o, &w.b, f, path) < 0)
		goto out_ifd;

	for (;;) {
		struct pollfd p[2] = { { .fd = w.ifd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
		ssize_t n;
		size_t off = 0;
		int end = 0;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			fs_failsys(f, errno, path, "watch: poll");
			break;
		}
		if (p[1].revents) {
			rc = 0; /* SIGTERM / SIGINT: a normal end */
			break;
		}
		if (!p[0].revents)
			continue;
		n = read(w.ifd, buf, WATCH_BUF);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			fs_failsys(f, errno, path, "watch: read inotify");
			break;
		}
		w.last_valid = false;
		/* Records are padded by the kernel so each one is aligned for the struct. */
		while (!end && off + sizeof(struct inotify_event) <= (size_t)n) {
			const struct inotify_event *ev = (const void *)(buf + off);

			if (off + sizeof(*ev) + ev->len > (size_t)n)
				break;
			end = handle(&w, ev, full);
			off += sizeof(*ev) + ev->len;
		}
		if (fs_out_flush(o) < 0) {
			fs_failsys(f, errno, path, "watch: write stdout");
			break;
		}
		if (end) {
			rc = 0;
			break;
		}
	}
out_ifd:
	close(w.ifd);
out:
	watcher_free(&w);
	return rc;
}
