/* test_envd_fs.c -- the agent's watch events as envd's FilesystemEvent (envd_watch_event, shared
 * by WatchDir and the polled watchers: e2b/envd_fs.h) */
#include <string.h>

#include "harness.h"
#include "e2b/envd_fs.h"

/* The events of line under dir (with st) as compact JSON, "overflow", "malformed". */
static const char *evs(struct envd_watch_state *st, const char *dir, const char *line)
{
	static char buf[512];
	json_t *e = NULL;
	int rc = envd_watch_event(st, dir, line, strlen(line), &e);
	char *s = e ? json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	snprintf(buf, sizeof(buf), "%s", rc < 0 ? "malformed" : rc == 1 ? "overflow" : s ? s : "null");
	free(s);
	json_decref(e);
	return buf;
}

/* The one event of line under dir, with a fresh state; "none" for no event. */
static const char *ev(const char *dir, const char *line)
{
	struct envd_watch_state st = { 0 };
	const char *s = evs(&st, dir, line);
	static char one[512];

	if (strcmp(s, "[]") == 0)
		return "none";
	if (s[0] != '[')
		return s;
	snprintf(one, sizeof(one), "%.*s", (int)strlen(s) - 2, s + 1);
	return one;
}

/* SPACE's atomic write as a watch sees it: envd shows only the user's file, created and
 * written. */
static void test_atomic_write(void)
{
	struct envd_watch_state st = { 0 };

	/* the O_TMPFILE before it has a name: its mode set, its content written */
	EXPECT(strcmp(evs(&st, "/w", "{\"type\":\"chmod\",\"path\":\"/w/#9\"}"), "[]") == 0);
	EXPECT(strcmp(evs(&st, "/w", "{\"type\":\"write\",\"path\":\"/w/#12\"}"), "[]") == 0);
	EXPECT(strcmp(ev("/w", "{\"type\":\"create\",\"path\":\"/w/#9\"}"),
		      "{\"name\":\"#9\",\"type\":\"EVENT_TYPE_CREATE\"}") == 0);
	EXPECT(strcmp(ev("/w", "{\"type\":\"chmod\",\"path\":\"/w/#9a\"}"),
		      "{\"name\":\"#9a\",\"type\":\"EVENT_TYPE_CHMOD\"}") == 0);
	EXPECT(strcmp(evs(&st, "/w", "{\"type\":\"create\",\"path\":\"/w/.a.txt.space-TvaSAn\"}"), "[]") == 0);
	EXPECT(strcmp(evs(&st, "/w", "{\"type\":\"chmod\",\"path\":\"/w/.a.txt.space-TvaSAn\"}"), "[]") == 0);
	EXPECT(strcmp(evs(&st, "/w", "{\"type\":\"rename\",\"path\":\"/w/.a.txt.space-TvaSAn\"}"), "[]") == 0);
	EXPECT(strcmp(evs(&st, "/w", "{\"type\":\"create\",\"path\":\"/w/a.txt\"}"),
		      "[{\"name\":\"a.txt\",\"type\":\"EVENT_TYPE_CREATE\"},"
		      "{\"name\":\"a.txt\",\"type\":\"EVENT_TYPE_WRITE\"}]") == 0);
	/* once: the next create of that name is a plain create */
	EXPECT(strcmp(evs(&st, "/w", "{\"type\":\"create\",\"path\":\"/w/a.txt\"}"),
		      "[{\"name\":\"a.txt\",\"type\":\"EVENT_TYPE_CREATE\"}]") == 0);
	/* recursive: in a subdirectory */
	EXPECT(strcmp(evs(&st, "/w", "{\"type\":\"rename\",\"path\":\"/w/d/.b.space-abc123\"}"), "[]") == 0);
	EXPECT(strcmp(evs(&st, "/w", "{\"type\":\"create\",\"path\":\"/w/d/b\"}"),
		      "[{\"name\":\"d/b\",\"type\":\"EVENT_TYPE_CREATE\"},{\"name\":\"d/b\",\"type\":\"EVENT_TYPE_WRITE\"}]") == 0);
	/* names that only look alike are the user's */
	EXPECT(strcmp(ev("/w", "{\"type\":\"create\",\"path\":\"/w/.a.space-ab\"}"),
		      "{\"name\":\".a.space-ab\",\"type\":\"EVENT_TYPE_CREATE\"}") == 0);
	EXPECT(strcmp(ev("/w", "{\"type\":\"create\",\"path\":\"/w/a.space-abcdef\"}"),
		      "{\"name\":\"a.space-abcdef\",\"type\":\"EVENT_TYPE_CREATE\"}") == 0);
	EXPECT(strcmp(ev("/w", "{\"type\":\"create\",\"path\":\"/w/.a.space-abc.ef\"}"),
		      "{\"name\":\".a.space-abc.ef\",\"type\":\"EVENT_TYPE_CREATE\"}") == 0);
}

static void test_events(void)
{
	EXPECT(strcmp(ev("/tmp/w", "{\"type\":\"create\",\"path\":\"/tmp/w/a.txt\",\"dir\":false}"),
		      "{\"name\":\"a.txt\",\"type\":\"EVENT_TYPE_CREATE\"}") == 0);
	/* recursive: names stay relative to the watched directory */
	EXPECT(strcmp(ev("/tmp/w", "{\"type\":\"write\",\"path\":\"/tmp/w/d/b\"}"),
		      "{\"name\":\"d/b\",\"type\":\"EVENT_TYPE_WRITE\"}") == 0);
	EXPECT(strcmp(ev("/", "{\"type\":\"remove\",\"path\":\"/etc\"}"),
		      "{\"name\":\"etc\",\"type\":\"EVENT_TYPE_REMOVE\"}") == 0);
	/* a prefix that is not the directory: the base name */
	EXPECT(strcmp(ev("/tmp/w", "{\"type\":\"chmod\",\"path\":\"/tmp/wx/c\"}"),
		      "{\"name\":\"c\",\"type\":\"EVENT_TYPE_CHMOD\"}") == 0);
	EXPECT(strcmp(ev("/tmp/w", "{\"type\":\"rename\",\"path\":\"/tmp/w/r\"}"),
		      "{\"name\":\"r\",\"type\":\"EVENT_TYPE_RENAME\"}") == 0);
	EXPECT(strcmp(ev("/tmp/w", "{\"type\":\"overflow\"}"), "overflow") == 0);
	EXPECT(strcmp(ev("/tmp/w", "{\"type\":\"other\",\"path\":\"/tmp/w/x\"}"), "none") == 0);
	EXPECT(strcmp(ev("/tmp/w", "{\"type\":\"create\"}"), "none") == 0);
	EXPECT(strcmp(ev("/tmp/w", "{\"type\":\"create\",\"path\":7}"), "none") == 0);
	EXPECT(strcmp(ev("/tmp/w", "[1]"), "malformed") == 0);
	EXPECT(strcmp(ev("/tmp/w", "{\"type\":"), "malformed") == 0);
	EXPECT(strcmp(ev("/tmp/w", "{\"type\":\"create\",\"type\":\"write\"}"), "malformed") == 0);
}

int main(void)
{
	RUN(test_events);
	RUN(test_atomic_write);
	return DONE();
}
