/* test_fs_watch.c -- `watch PATH [-r]` (docs/design/channels.md): a watcher runs in a child with
 * stdout on a pipe; the test changes the directory and waits for the matching JSON lines. */
#include <poll.h>
#include <time.h>

#include "harness.h"
#include "test_fs_util.h"

#define WAIT_MS 5000

struct watch {
	pid_t pid;
	int out;
	char buf[1 << 16];
	size_t len;
	json_t *events; /* received, not yet matched */
	json_t *head;
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read what is there (waiting up to ms); parse whole lines.  0, or -1 at EOF. */
static int pump(struct watch *w, int ms)
{
	struct pollfd p = { .fd = w->out, .events = POLLIN };
	ssize_t n;
	char *nl;

	if (poll(&p, 1, ms) <= 0)
		return 0;
	n = read(w->out, w->buf + w->len, sizeof(w->buf) - w->len);
	if (n <= 0)
		return -1;
	w->len += (size_t)n;
	while ((nl = memchr(w->buf, '\n', w->len))) {
		json_t *j = json_loadb(w->buf, (size_t)(nl - w->buf), 0, NULL);

		if (!j)
			NOTE("bad line: %.*s", (int)(nl - w->buf), w->buf);
		else if (!w->head)
			w->head = j;
		else
			json_array_append_new(w->events, j);
		w->len -= (size_t)(nl + 1 - w->buf);
		memmove(w->buf, nl + 1, w->len);
	}
	return 0;
}

static int watch_start(struct watch *w, const char *path, bool rec)
{
	int fds[2];
	long long end = now_ms() + WAIT_MS;

	memset(w, 0, sizeof(*w));
	w->events = json_array();
	if (pipe(fds) < 0)
		return -1;
	fflush(stdout);
	w->pid = fork();
	if (w->pid == 0) {
		char *argv[] = { "watch", (char *)path, rec ? "-r" : NULL, NULL };
		int devnull = open("/dev/null", O_RDWR);

		fs_child_signals();
		dup2(devnull, 0);
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		exit(fsop_main(rec ? 3 : 2, argv));
	}
	close(fds[1]);
	w->out = fds[0];
	while (!w->head && now_ms() < end)
		if (pump(w, 100) < 0)
			break;
	return w->head ? 0 : -1;
}

/* Wait for an event of that type and path (dir: 0/1, -1 any); it is consumed. */
static bool expect_event(struct watch *w, const char *type, const char *path, int dir)
{
	long long end = now_ms() + WAIT_MS;

	for (;;) {
		size_t i;

		for (i = 0; i < json_array_size(w->events); i++) {
			json_t *e = json_array_get(w->events, i);

			if (strcmp(jstr(e, "type"), type) == 0 && strcmp(jstr(e, "path"), path) == 0 &&
			    (dir < 0 || json_is_true(json_object_get(e, "dir")) == (dir == 1))) {
				json_array_remove(w->events, i);
				return true;
			}
		}
		if (now_ms() >= end || pump(w, 50) < 0) {
			NOTE("no %s event for %s; unmatched:", type, path);
			for (i = 0; i < json_array_size(w->events); i++)
				NOTE("  %s %s", jstr(json_array_get(w->events, i), "type"),
				     jstr(json_array_get(w->events, i), "path"));
			return false;
		}
	}
}

/* Whether any received event mentions path (after a settling pause). */
static bool seen_path(struct watch *w, const char *path)
{
	size_t i;

	pump(w, 200);
	for (i = 0; i < json_array_size(w->events); i++)
		if (strcmp(jstr(json_array_get(w->events, i), "path"), path) == 0)
			return true;
	return false;
}

/* Stop with sig (0: wait for the watcher to end by itself); its exit code. */
static int watch_stop(struct watch *w, int sig)
{
	int st;
	long long end = now_ms() + WAIT_MS;
	pid_t r;

	if (sig)
		kill(w->pid, sig);
	while ((r = waitpid(w->pid, &st, WNOHANG)) == 0 && now_ms() < end)
		usleep(10000);
	if (r == 0) {
		kill(w->pid, SIGKILL);
		waitpid(w->pid, &st, 0);
		st = 0xff00;
	}
	while (pump(w, 0) == 0 && w->len < sizeof(w->buf)) {
		struct pollfd p = { .fd = w->out, .events = POLLIN };

		if (poll(&p, 1, 0) <= 0)
			break;
	}
	close(w->out);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void watch_free(struct watch *w)
{
	json_decref(w->events);
	json_decref(w->head);
}

static void touch(const char *p, const char *data)
{
	put_file(p, data, strlen(data), 0644);
}

static void flat(void)
{
	struct watch w;
	const char *d = P("w1");

	mkdir(d, 0755);
	if (!CHECK(watch_start(&w, d, false) == 0, "watch started"))
		return;
	EXPECT(strcmp(jstr(w.head, "path"), d) == 0);
	touch(P("w1/f"), "x");
	EXPECT(expect_event(&w, "create", P("w1/f"), 0));
	EXPECT(expect_event(&w, "write", P("w1/f"), 0));
	EXPECT_EQ(rename(P("w1/f"), P("w1/g")), 0);
	EXPECT(expect_event(&w, "rename", P("w1/f"), 0));
	EXPECT(expect_event(&w, "create", P("w1/g"), 0));
	EXPECT_EQ(chmod(P("w1/g"), 0600), 0);
	EXPECT(expect_event(&w, "chmod", P("w1/g"), 0));
	EXPECT_EQ(unlink(P("w1/g")), 0);
	EXPECT(expect_event(&w, "remove", P("w1/g"), 0));
	EXPECT_EQ(mkdir(P("w1/sub"), 0755), 0);
	EXPECT(expect_event(&w, "create", P("w1/sub"), 1));
	/* Not recursive: nothing from inside sub. */
	touch(P("w1/sub/inner"), "i");
	touch(P("w1/marker"), "m");
	EXPECT(expect_event(&w, "create", P("w1/marker"), 0));
	EXPECT(!seen_path(&w, P("w1/sub/inner")));
	EXPECT_EQ(watch_stop(&w, SIGTERM), 0);
	watch_free(&w);
}

static void recursive(void)
{
	struct watch w;
	const char *d = P("w2");

	mkdir(d, 0755);
	mkdir(P("w2/pre"), 0755);
	symlink(P("w1"), P("w2/elsewhere")); /* not followed */
	if (!CHECK(watch_start(&w, d, true) == 0, "recursive watch started"))
		return;
	touch(P("w2/pre/a"), "a");
	EXPECT(expect_event(&w, "create", P("w2/pre/a"), 0));
	EXPECT(expect_event(&w, "write", P("w2/pre/a"), 0));

	/* A directory made after the start, and a file in it at once. */
	EXPECT_EQ(mkdir(P("w2/new"), 0755), 0);
	touch(P("w2/new/f1"), "1");
	EXPECT(expect_event(&w, "create", P("w2/new"), 1));
	EXPECT(expect_event(&w, "create", P("w2/new/f1"), 0));
	touch(P("w2/new/f1"), "11");
	EXPECT(expect_event(&w, "write", P("w2/new/f1"), 0));
	EXPECT_EQ(mkdir(P("w2/new/n2"), 0755), 0);
	EXPECT_EQ(mkdir(P("w2/new/n2/n3"), 0755), 0);
	touch(P("w2/new/n2/n3/deep"), "d");
	EXPECT(expect_event(&w, "create", P("w2/new/n2/n3/deep"), 0));
	EXPECT_EQ(rename(P("w2/new/f1"), P("w2/new/f9")), 0);
	EXPECT(expect_event(&w, "rename", P("w2/new/f1"), 0));
	EXPECT(expect_event(&w, "create", P("w2/new/f9"), 0));
	EXPECT_EQ(unlink(P("w2/new/f9")), 0);
	EXPECT(expect_event(&w, "remove", P("w2/new/f9"), 0));

	/* A directory renamed inside the tree keeps being watched, under its new name. */
	EXPECT_EQ(rename(P("w2/new"), P("w2/moved")), 0);
	EXPECT(expect_event(&w, "rename", P("w2/new"), 1));
	EXPECT(expect_event(&w, "create", P("w2/moved"), 1));
	touch(P("w2/moved/n2/n3/after"), "x");
	EXPECT(expect_event(&w, "create", P("w2/moved/n2/n3/after"), 0));
	/* Moved out of the tree: no more events from it. */
	EXPECT_EQ(rename(P("w2/moved"), P("gone-out")), 0);
	EXPECT(expect_event(&w, "rename", P("w2/moved"), 1));
	touch(P("gone-out/n2/late"), "x");
	touch(P("w2/marker"), "m");
	EXPECT(expect_event(&w, "create", P("w2/marker"), 0));
	EXPECT(!seen_path(&w, P("w2/moved/n2/late")));
	EXPECT_EQ(watch_stop(&w, SIGINT), 0);
	watch_free(&w);
}

static void root_removed(void)
{
	struct watch w;
	const char *d = P("w3");

	mkdir(d, 0755);
	if (!CHECK(watch_start(&w, d, true) == 0, "watch started"))
		return;
	EXPECT_EQ(rmdir(d), 0);
	EXPECT(expect_event(&w, "remove", d, 1));
	EXPECT_EQ(watch_stop(&w, 0), 0);
	watch_free(&w);
}

static void errors(void)
{
	struct fsrun r;

	touch(P("plain"), "p");
	FSRUN(&r, NULL, 0, "watch", (char *)P("plain"));
	EXPECT(fs_failed_with(&r, ENOTDIR, "ENOTDIR"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "watch", (char *)P("missing"), "-r");
	EXPECT(fs_failed_with(&r, ENOENT, "ENOENT"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "watch", (char *)P("plain"), "-p");
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
}

int main(void)
{
	fs_tmpdir();
	RUN(flat);
	RUN(recursive);
	RUN(root_removed);
	RUN(errors);
	return DONE();
}
