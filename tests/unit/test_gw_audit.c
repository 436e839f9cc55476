/* test_gw_audit.c -- the gateway's audit log (src/gateway/audit.c): one JSON line per record
 * with the fields of egress.md, header names only, rotation to audit.log.1 past 4 MiB. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gw.h"
#include "harness.h"

static char dir[] = "/tmp/test_gw_audit.XXXXXX";

static off_t file_size(const char *name)
{
	char p[256];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return stat(p, &st) == 0 ? st.st_size : -1;
}

static json_t *last_record(void)
{
	char p[256], line[4096], last[4096] = "";
	FILE *f;

	snprintf(p, sizeof(p), "%s/audit.log", dir);
	f = fopen(p, "r");
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f))
		memcpy(last, line, sizeof(last));
	fclose(f);
	return json_loads(last, 0, NULL);
}

static void record_fields(struct gw *g)
{
	const char *inj[] = { "Authorization", "X-Api-Key" };
	struct gw_audit_rec r = { .proto = "https", .addr = 0xcb007107u, .port = 443, .name = "api.example.com",
				  .allow = true, .reason = "allowed by api.example.com:443", .bytes_out = 123,
				  .bytes_in = 456, .injected = inj, .n_injected = 2 };
	json_t *j;
	const char *t;

	gw_audit(g, &r);
	j = last_record();
	if (!CHECK(j, "record is JSON"))
		return;
	t = json_string_value(json_object_get(j, "time"));
	EXPECT(t && strlen(t) == 24 && t[10] == 'T' && t[19] == '.' && t[23] == 'Z');
	EXPECT(strcmp(json_string_value(json_object_get(j, "sandbox")), "sb-test") == 0);
	EXPECT(strcmp(json_string_value(json_object_get(j, "dst")), "203.0.113.7:443") == 0);
	EXPECT(strcmp(json_string_value(json_object_get(j, "verdict")), "allow") == 0);
	EXPECT_EQ(json_integer_value(json_object_get(j, "bytes_out")), 123);
	EXPECT_EQ(json_integer_value(json_object_get(j, "bytes_in")), 456);
	EXPECT_EQ(json_array_size(json_object_get(j, "injected")), 2);
	EXPECT(strcmp(json_string_value(json_array_get(json_object_get(j, "injected"), 1)), "X-Api-Key") == 0);
	json_decref(j);
}

static void rotation(struct gw *g)
{
	struct gw_audit_rec r = { .proto = "dns", .name = "x.example.com", .allow = false, .reason = "not allowed" };

	for (int i = 0; i < 60000; i++)
		gw_audit(g, &r);
	EXPECT(file_size("audit.log.1") > GW_AUDIT_ROTATE);
	EXPECT(file_size("audit.log.1") < GW_AUDIT_ROTATE + 1024);
	EXPECT(file_size("audit.log") > 0 && file_size("audit.log") <= GW_AUDIT_ROTATE);
}

static struct gw *h_g;
static void fields(void) { record_fields(h_g); }
static void rotate(void) { rotation(h_g); }

int main(void)
{
	struct gw g = { .sandbox = "sb-test" };
	space_err err;
	char cmd[300];

	if (!mkdtemp(dir))
		SKIP_ALL("mkdtemp");
	if (!CHECK(gw_audit_open(&g.audit, dir, "sb-test", (uid_t)-1, (gid_t)-1, &err) == 0, "open: %s", err.msg))
		return DONE();
	h_g = &g;
	RUN(fields);
	RUN(rotate);
	gw_audit_close(&g.audit);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		NOTE("could not remove %s", dir);
	return DONE();
}
