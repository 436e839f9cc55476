/* test_envd_fs.c -- the agent's watch events as envd's FilesystemEvent (envd_watch_event, shared
 * by WatchDir and the polled watchers: e2b/envd_fs.h) */
#include <string.h>

#include "harness.h"
#include "e2b/envd_fs.h"

/* The event of line under dir as compact JSON, "overflow", "malformed" or "none". */
static const char *ev(const char *dir, const char *line)
{
	static char buf[512];
	json_t *e = NULL;
	int rc = envd_watch_event(dir, line, strlen(line), &e);
	char *s = e ? json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	snprintf(buf, sizeof(buf), "%s", rc < 0 ? "malformed" : rc == 1 ? "overflow" : s ? s : "none");
	free(s);
	json_decref(e);
	return buf;
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
	return DONE();
}
