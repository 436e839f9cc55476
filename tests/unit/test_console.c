/* test_console.c -- console capture: bytes reach the log, the log stays bounded, EOF is handled */
#include <event2/event.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/vmm/console.h"
#include "harness.h"

static struct event_base *base;

static void pump(void)
{
	for (int i = 0; i < 5; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;

	*len = 0;
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	} else {
		*len = (size_t)n;
	}
	fclose(f);
	return buf;
}

static void test_console(void)
{
	char dir[] = "/tmp/test_console.XXXXXX", path[256], line[64];
	int sv[2];
	space_err err = { 0 };
	size_t len, max_seen = 0;

	base = event_base_new();
	if (!mkdtemp(dir))
		SKIP_ALL("mkdtemp failed");
	snprintf(path, sizeof(path), "%s/console.log", dir);

	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	struct console *c = console_new(base, sv[0], path, 4096, 1024, &err);
	CHECK(c != NULL, "console_new (%s)", err.msg);
	if (write(sv[1], "hello\n", 6) != 6)
		abort();
	pump();
	char *s = slurp(path, &len);
	CHECK(s && strcmp(s, "hello\n") == 0, "bytes reach the log");
	free(s);

	/* A guest that prints forever: the file never exceeds the bound. */
	for (int i = 0; i < 2000; i++) {
		int n = snprintf(line, sizeof(line), "line %05d of the flood\n", i);
		if (write(sv[1], line, (size_t)n) != n)
			abort();
		if (i % 20 == 0) {
			pump();
			struct stat st;
			stat(path, &st);
			if ((size_t)st.st_size > max_seen)
				max_seen = (size_t)st.st_size;
		}
	}
	pump();
	CHECK(max_seen <= 4096, "log stayed within 4096 bytes (max seen %zu)", max_seen);
	s = slurp(path, &len);
	CHECK(s && strncmp(s, "[space: console log truncated", 29) == 0, "trimmed log starts with the marker");
	const char *newest = "line 01999 of the flood\n";
	CHECK(s && len >= strlen(newest) && strcmp(s + len - strlen(newest), newest) == 0,
	      "trimmed log ends with the newest line");
	char *second = s ? strchr(s, '\n') : NULL;
	CHECK(second && strncmp(second + 1, "line ", 5) == 0, "kept part starts at a line boundary");
	free(s);
	char tmp[300];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	CHECK(access(tmp, F_OK) < 0, "no temporary file left behind");

	/* QEMU goes away: EOF closes the socket, the log stays. */
	close(sv[1]);
	pump();
	console_drain(c);
	console_free(c);

	/* Reattach (adoption): appends to the existing log, bound still holds. */
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	s = slurp(path, &len);
	free(s);
	size_t before = len;
	c = console_new(base, sv[0], path, 4096, 1024, &err);
	if (write(sv[1], "again\n", 6) != 6)
		abort();
	pump();
	console_drain(c);
	s = slurp(path, &len);
	CHECK(s && len == before + 6 && strcmp(s + before, "again\n") == 0, "reattached console appends");
	free(s);
	console_free(c);
	close(sv[1]);

	/* A symlink planted in place of the log is not followed. */
	unlink(path);
	if (symlink("/etc/hostname", path) < 0)
		abort();
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	c = console_new(base, sv[0], path, 4096, 1024, &err);
	CHECK(c == NULL, "console log symlink refused (%s)", err.msg);
	close(sv[1]);
	unlink(path);
	rmdir(dir);
	event_base_free(base);
}

int main(void)
{
	RUN(test_console);
	return DONE();
}
