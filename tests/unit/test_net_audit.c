/* test_net_audit.c -- reading a gateway's audit log (hostile input: bad lines, huge lines,
 * symlinks, partial lines) and parsing client policies into the normalised form */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/front/req.h"
#include "daemon/net/net.h"
#include "harness.h"

static char dir[64];

static void put(const char *name, const char *text)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
}

static int seq(json_t *records, size_t i)
{
	return (int)json_integer_value(json_object_get(json_array_get(records, i), "n"));
}

static void test_audit(void)
{
	space_err err = { 0 };
	json_t *r = NULL;
	char big[6000];

	snprintf(dir, sizeof(dir), "/tmp/test-net-audit-XXXXXX");
	CHECK(mkdtemp(dir) != NULL, "temp dir");
	CHECK(net_audit_read(dir, 10, &r, &err) == 0 && json_array_size(r) == 0, "no files: none");
	json_decref(r);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	put("audit.log.1", "{\"n\":1}\nnot json\n[1,2]\n{\"n\":2}\n");
	char text[7000];
	snprintf(text, sizeof(text), "{\"n\":3,\"pad\":\"%s\"}\n{\"n\":4}\n\n{\"n\":5}\n{\"n\":6", big);
	put("audit.log", text);
	CHECK(net_audit_read(dir, 10, &r, &err) == 0, "read: %s", err.msg);
	CHECK(json_array_size(r) == 4 && seq(r, 0) == 1 && seq(r, 1) == 2 && seq(r, 2) == 4 && seq(r, 3) == 5,
	      "objects only, oldest first, over-long and partial lines skipped (%zu)", json_array_size(r));
	json_decref(r);
	CHECK(net_audit_read(dir, 2, &r, &err) == 0 && json_array_size(r) == 2 && seq(r, 0) == 4 && seq(r, 1) == 5,
	      "limit keeps the newest");
	json_decref(r);
	/* A symlink the gateway planted is not followed. */
	char path[128];
	snprintf(path, sizeof(path), "%s/audit.log", dir);
	unlink(path);
	CHECK(symlink("/etc/passwd", path) == 0, "symlink planted");
	CHECK(net_audit_read(dir, 10, &r, &err) == 0 && json_array_size(r) == 2, "a symlink is skipped");
	json_decref(r);
	unlink(path);
	snprintf(path, sizeof(path), "%s/audit.log.1", dir);
	unlink(path);
	rmdir(dir);
}

static void test_req_network(void)
{
	space_err err = { 0 };
	json_t *out = NULL;
	json_t *in = json_loads("{\"allow\":[\"PyPI.org.\",\"*.example.com:443\"],\"inject\":[{\"host\":\"a.example\","
				"\"header\":\"X-Key\",\"secret\":\"k\"}]}", 0, NULL);

	CHECK(req_network(in, &out, &err) == 0, "a good policy: %s", err.msg);
	CHECK(!strcmp(json_string_value(json_array_get(json_object_get(out, "allow"), 0)), "pypi.org"),
	      "normalised");
	json_decref(out);
	json_decref(in);
	in = json_loads("{\"allow\":[\"ok.example\",\"bad host\"]}", 0, NULL);
	CHECK(req_network(in, &out, &err) < 0 && err.code == EINVAL && strstr(err.msg, "allow[1]"),
	      "the bad entry named: %s", err.msg);
	json_decref(in);
	in = json_loads("[1]", 0, NULL);
	CHECK(req_network(in, &out, &err) < 0 && err.code == EINVAL, "not an object");
	json_decref(in);
}

int main(void)
{
	RUN(test_audit);
	RUN(test_req_network);
	return DONE();
}
