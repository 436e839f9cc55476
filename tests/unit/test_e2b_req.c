/* test_e2b_req.c -- E2B's control-plane bodies and queries into the core's typed requests,
 * and the pure renderers (e2b_req.c, e2b_render.c) */
#include <stdlib.h>
#include <string.h>

#include "daemon/e2b/e2b.h"
#include "daemon/e2b/e2b_ctl.h"
#include "harness.h"

static char last[1024];

static json_t *J(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	if (!j)
		NOTE("bad test JSON %s: %s", text, e.text);
	return j;
}

/* 0 or the error code of e2b_req_create on text; r is freed unless keep. */
static int create(const char *text, struct create_req *r, bool keep)
{
	space_err e = { 0 };
	json_t *b = J(text);
	int rc = e2b_req_create(b, r, &e);

	json_decref(b);
	snprintf(last, sizeof(last), "%s", e.msg);
	if (rc == 0 && !keep)
		create_req_free(r);
	return rc < 0 ? e.code : 0;
}

static void test_create(void)
{
	static const struct {
		const char *body;
		int code;
	} table[] = {
		{ "{}", 0 },
		{ "{\"templateID\":\"base\",\"timeout\":300}", 0 },
		{ "{\"templateID\":\"code-interpreter-v1\",\"metadata\":{\"a\":\"b\"},\"envVars\":{\"X\":\"1\"}}", 0 },
		{ "{\"secure\":true,\"autoPause\":false,\"autoPauseMemory\":true}", 0 },
		{ "{\"mcp\":null,\"volumeMounts\":[],\"autoResume\":{\"enabled\":false}}", 0 },
		{ "{\"unknownButHarmless\":1}", 0 },
		{ "[]", EINVAL },
		{ "{\"templateID\":7}", EINVAL },
		{ "{\"templateID\":\"\"}", EINVAL },
		{ "{\"timeout\":-1}", EINVAL },
		{ "{\"timeout\":1.5}", EINVAL },
		{ "{\"timeout\":99999999999}", EINVAL },
		{ "{\"autoPause\":\"yes\"}", EINVAL },
		{ "{\"metadata\":{\"a\":1}}", EINVAL },
		{ "{\"metadata\":[]}", EINVAL },
		{ "{\"envVars\":{\"\":\"x\"}}", EINVAL },
		{ "{\"envVars\":{\"A=B\":\"x\"}}", EINVAL },
		{ "{\"volumeMounts\":[{\"name\":\"v\",\"path\":\"/d\"}]}", EINVAL },
		{ "{\"mcp\":{\"x\":{}}}", EINVAL },
		{ "{\"autoResume\":{\"enabled\":true}}", EINVAL },
		{ "{\"autoResume\":true}", EINVAL },
		{ "{\"allow_internet_access\":1}", EINVAL },
		{ "{\"network\":{\"allowOut\":\"pypi.org\"}}", EINVAL },
		{ "{\"network\":{\"allowOut\":[1]}}", EINVAL },
		{ "{\"network\":{\"allowOut\":[\"bad name!\"]}}", EINVAL },
		{ "{\"network\":{\"egressProxy\":{\"address\":\"p:1080\"}}}", EINVAL },
		{ "{\"network\":{\"rules\":{\"a.com\":[{}]}}}", EINVAL },
		{ "{\"network\":7}", EINVAL },
	};
	struct create_req r;

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		CHECK(create(table[i].body, &r, false) == table[i].code, "create %s -> %d (%s)", table[i].body,
		      table[i].code, last);

	CHECK(create("{}", &r, true) == 0 && !strcmp(r.template_ref, "base") && !r.timeout_set &&
		      !r.on_timeout_set && r.network && !r.snapshot[0] &&
		      json_array_size(json_object_get(r.network, "allow")) == 2 &&
		      !strcmp(json_string_value(json_array_get(json_object_get(r.network, "allow"), 1)), "*"),
	      "an empty create: template base, the daemon's timeout, E2B's internet (every address and name)");
	create_req_free(&r);
	CHECK(create("{\"templateID\":\"minimal\",\"timeout\":15,\"autoPause\":true,\"metadata\":{\"k\":\"v\"},"
		     "\"envVars\":{\"A\":\"1\"}}",
		     &r, true) == 0 &&
		      !strcmp(r.template_ref, "minimal") && r.timeout_set && r.timeout_s == 15 && r.on_timeout_set &&
		      r.on_timeout == ON_TIMEOUT_SUSPEND && !strcmp(strmap_get(&r.metadata, "k"), "v") &&
		      !strcmp(strmap_get(&r.env, "A"), "1"),
	      "timeout, autoPause -> suspend, metadata and envVars carried");
	create_req_free(&r);
	CHECK(create("{\"autoPause\":false}", &r, true) == 0 && r.on_timeout_set && r.on_timeout == ON_TIMEOUT_DELETE,
	      "autoPause false -> delete");
	create_req_free(&r);
}

/* The policy e2b_req_network makes, as compact JSON ("NULL" for none, "ERR" on error). */
static const char *net(int internet, const char *network)
{
	static char out[512];
	space_err e = { 0 };
	json_t *n = network ? J(network) : NULL, *pol = NULL;
	char *s;

	if (e2b_req_network(internet, n, &pol, &e) < 0) {
		snprintf(out, sizeof(out), "ERR");
		snprintf(last, sizeof(last), "%s", e.msg);
	} else if (!pol) {
		snprintf(out, sizeof(out), "NULL");
	} else {
		s = json_dumps(pol, JSON_COMPACT | JSON_SORT_KEYS);
		snprintf(out, sizeof(out), "%s", s ? s : "OOM");
		free(s);
	}
	json_decref(pol);
	json_decref(n);
	return out;
}

static void test_network(void)
{
	/* E2B's internet (true, or nothing said) is every public address and every name. */
#define OPEN "\"0.0.0.0/0\",\"*\""
	static const struct {
		int internet;
		const char *network;
		const char *want;
	} table[] = {
		{ -1, NULL, "{\"allow\":[" OPEN "],\"deny\":[]}" },
		{ 1, NULL, "{\"allow\":[" OPEN "],\"deny\":[]}" },
		{ -1, "{}", "{\"allow\":[" OPEN "],\"deny\":[]}" },
		{ 0, NULL, "{\"allow\":[],\"deny\":[]}" },
		{ 0, "{\"allowOut\":[\"pypi.org\"]}", "{\"allow\":[\"pypi.org\"],\"deny\":[]}" },
		{ -1, "{\"allowOut\":[\"pypi.org\",\"1.2.3.4\"],\"denyOut\":[\"0.0.0.0/0\"]}",
		  "{\"allow\":[\"pypi.org\",\"1.2.3.4\"],\"deny\":[]}" },
		{ -1, "{\"denyOut\":[\"10.0.0.0/8\",\"1.2.3.4\"],\"allowOut\":[\"1.2.3.4\"]}",
		  "{\"allow\":[" OPEN ",\"1.2.3.4\"],\"deny\":[\"10.0.0.0/8\"]}" },
		{ 1, "{\"denyOut\":[\"blocked.example\",\"203.0.113.0/24\"]}",
		  "{\"allow\":[" OPEN "],\"deny\":[\"blocked.example\",\"203.0.113.0/24\"]}" },
		{ -1, "{\"allowOut\":[\"*.example.com\"],\"allowPublicTraffic\":false,\"maskRequestHost\":\"x\"}",
		  "{\"allow\":[" OPEN ",\"*.example.com\"],\"deny\":[]}" },
		{ 1, "{\"allowOut\":[\"0.0.0.0/0\",\"*\"]}", "{\"allow\":[" OPEN "],\"deny\":[]}" },
		{ 0, "{\"allowOut\":[\"*\"]}", "{\"allow\":[\"*\"],\"deny\":[]}" },
		{ -1, "{\"allowOut\":[\"Not A Name\"]}", "ERR" },
		{ -1, "{\"denyOut\":[\"::/0\"]}", "ERR" },
		{ -1, "{\"denyOut\":{}}", "ERR" },
		{ -1, "[]", "ERR" },
	};
#undef OPEN

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		const char *got = net(table[i].internet, table[i].network);
		const char *want = table[i].want, *inj = strstr(got, ",\"inject\":[]");
		char norm[512];

		/* The normaliser adds an empty inject list. */
		if (inj)
			snprintf(norm, sizeof(norm), "%.*s%s", (int)(inj - got), got, inj + strlen(",\"inject\":[]"));
		else
			snprintf(norm, sizeof(norm), "%s", got);
		bool ok = strcmp(norm, want) == 0;

		CHECK(ok, "network internet=%d %s -> %s (got %s; %s)", table[i].internet,
		      table[i].network ? table[i].network : "none", want, got, last);
	}
}

/* What net() gives, less the empty inject list the normaliser adds. */
static const char *net_plain(int internet, const char *network)
{
	static char out[512];
	const char *got = net(internet, network), *inj = strstr(got, ",\"inject\":[]");

	snprintf(out, sizeof(out), "%.*s%s", inj ? (int)(inj - got) : (int)strlen(got), got,
		 inj ? inj + strlen(",\"inject\":[]") : "");
	return out;
}

/* GET /sandboxes/{id}'s allowInternetAccess and network from a stored policy; fed back to
 * e2b_req_network, what we render makes that policy again (back; NULL: not ours to round-trip). */
static void test_network_back(void)
{
	static const struct {
		const char *policy;
		bool open;
		const char *want, *back;
	} table[] = {
		{ "{\"allow\":[\"0.0.0.0/0\",\"*\"],\"deny\":[],\"inject\":[]}", true, "{\"allowOut\":[],\"denyOut\":[]}",
		  "{\"allow\":[\"0.0.0.0/0\",\"*\"],\"deny\":[]}" },
		/* an open policy of an older create: shown the same; sent back it gains every name */
		{ "{\"allow\":[\"0.0.0.0/0\"],\"deny\":[],\"inject\":[]}", true, "{\"allowOut\":[],\"denyOut\":[]}",
		  "{\"allow\":[\"0.0.0.0/0\",\"*\"],\"deny\":[]}" },
		{ "{\"allow\":[],\"deny\":[],\"inject\":[]}", false, "{\"allowOut\":[],\"denyOut\":[\"0.0.0.0/0\"]}",
		  "{\"allow\":[],\"deny\":[]}" },
		{ "{}", false, "{\"allowOut\":[],\"denyOut\":[\"0.0.0.0/0\"]}", NULL },
		{ "{\"allow\":[\"pypi.org\"],\"deny\":[]}", false, "{\"allowOut\":[\"pypi.org\"],\"denyOut\":[\"0.0.0.0/0\"]}",
		  "{\"allow\":[\"pypi.org\"],\"deny\":[]}" },
		{ "{\"allow\":[\"0.0.0.0/0\",\"*\",\"1.2.3.4\"],\"deny\":[\"10.0.0.0/8\"]}", true,
		  "{\"allowOut\":[\"1.2.3.4\"],\"denyOut\":[\"10.0.0.0/8\"]}",
		  "{\"allow\":[\"0.0.0.0/0\",\"*\",\"1.2.3.4\"],\"deny\":[\"10.0.0.0/8\"]}" },
		/* closed: "*" is an allowOut entry like any */
		{ "{\"allow\":[\"*\"],\"deny\":[]}", false, "{\"allowOut\":[\"*\"],\"denyOut\":[\"0.0.0.0/0\"]}",
		  "{\"allow\":[\"*\"],\"deny\":[]}" },
		{ "{\"allow\":\"x\",\"deny\":7}", false, "{\"allowOut\":[],\"denyOut\":[\"0.0.0.0/0\"]}", NULL },
	};

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		json_t *pol = J(table[i].policy), *n = NULL;
		bool open = !table[i].open;
		char *s = NULL;

		if (e2b_network_json(pol, &open, &n) == 0 && n)
			s = json_dumps(n, JSON_COMPACT);
		CHECK(s && !strcmp(s, table[i].want) && open == table[i].open, "%s -> %s open=%d (got %s open=%d)",
		      table[i].policy, table[i].want, table[i].open, s ? s : "NULL", open);
		if (s && table[i].back) {
			const char *got = net_plain(open ? 1 : 0, s);

			CHECK(!strcmp(got, table[i].back), "round trip %s -> %s -> %s (want %s)", table[i].policy, s, got,
			      table[i].back);
		}
		free(s);
		json_decref(n);
		json_decref(pol);
	}
}

static void test_timeouts_fork_snapshot(void)
{
	struct timeout_req t;
	space_err e = { 0 };
	json_t *b;
	bool set;
	int count;
	char name[SPEC_NAME_MAX + 1];

	b = J("{\"timeout\":60}");
	CHECK(e2b_req_timeout(b, "timeout", &t, &set, &e) == 0 && set && t.timeout_s == 60 && !t.on_timeout_set,
	      "timeout 60");
	json_decref(b);
	b = J("{}");
	CHECK(e2b_req_timeout(b, "duration", &t, &set, &e) == 0 && !set, "refresh without a duration");
	json_decref(b);
	b = J("{\"duration\":\"1m\"}");
	CHECK(e2b_req_timeout(b, "duration", &t, &set, &e) < 0 && e.code == EINVAL, "duration must be a number");
	json_decref(b);
	b = J("{\"count\":3,\"timeout\":30}");
	CHECK(e2b_req_fork(b, &count, &t, &set, &e) == 0 && count == 3 && set && t.timeout_s == 30, "fork 3");
	json_decref(b);
	b = J("{}");
	CHECK(e2b_req_fork(b, &count, &t, &set, &e) == 0 && count == 1 && !set, "fork defaults to one");
	json_decref(b);
	b = J("{\"count\":0}");
	CHECK(e2b_req_fork(b, &count, &t, &set, &e) < 0, "fork 0 refused");
	json_decref(b);
	b = J("{\"count\":1000}");
	CHECK(e2b_req_fork(b, &count, &t, &set, &e) < 0, "fork too many refused");
	json_decref(b);
	b = J("{}");
	CHECK(e2b_req_snapshot(b, name, sizeof(name), &e) == 0 && !name[0], "snapshot without a name");
	json_decref(b);
	b = J("{\"name\":\"my-snap\"}");
	CHECK(e2b_req_snapshot(b, name, sizeof(name), &e) == 0 && !strcmp(name, "my-snap"), "named snapshot");
	json_decref(b);
	b = J("{\"name\":\"sn-0123456789abcdef\"}");
	CHECK(e2b_req_snapshot(b, name, sizeof(name), &e) < 0, "a name shaped like an id is refused");
	json_decref(b);
	b = J("{\"name\":\"../x\"}");
	CHECK(e2b_req_snapshot(b, name, sizeof(name), &e) < 0, "a name with a slash is refused");
	json_decref(b);
}

static void test_queries(void)
{
	static const struct {
		const char *in;
		int n; /* pairs, -1: refused */
		const char *k0, *v0;
	} table[] = {
		{ "", 0, NULL, NULL },
		{ "a=b", 1, "a", "b" },
		{ "a=b&c=d", 2, "a", "b" },
		{ "user%20id=x%26y", 1, "user id", "x&y" },
		{ "k=a+b", 1, "k", "a b" },
		{ "&&a=b&", 1, "a", "b" },
		{ "k=", 1, "k", "" },
		{ "novalue", -1, NULL, NULL },
		{ "=v", -1, NULL, NULL },
		{ "k=%zz", -1, NULL, NULL },
		{ "k=%4", -1, NULL, NULL },
		{ "k=%00", -1, NULL, NULL },
	};
	unsigned mask;
	int limit;
	space_err e = { 0 };

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		struct strmap m;
		int rc = e2b_req_metadata_filter(table[i].in, &m, &e);
		bool ok = table[i].n < 0 ? rc < 0 && m.n == 0
					 : rc == 0 && (int)m.n == table[i].n &&
						   (!table[i].k0 || (!strcmp(m.keys[0], table[i].k0) &&
								     !strcmp(m.values[0], table[i].v0)));

		CHECK(ok, "metadata filter '%s' -> %d pairs", table[i].in, table[i].n);
		strmap_free(&m);
	}
	{
		char big[4096] = "";
		struct strmap m;

		for (int i = 0; i < 40; i++)
			snprintf(big + strlen(big), sizeof(big) - strlen(big), "k%d=v&", i);
		CHECK(e2b_req_metadata_filter(big, &m, &e) < 0, "too many filter pairs refused");
		strmap_free(&m);
	}
	mask = 0;
	CHECK(e2b_req_states("running", &mask, &e) == 0 && mask == E2B_STATE_RUNNING, "state running");
	CHECK(e2b_req_states("running,paused", &mask, &e) == 0 && mask == (E2B_STATE_RUNNING | E2B_STATE_PAUSED),
	      "state running,paused");
	CHECK(e2b_req_states("killed", &mask, &e) < 0, "unknown state refused");
	CHECK(e2b_req_limit(NULL, &limit, &e) == 0 && limit == E2B_LIST_DEFAULT, "default limit");
	CHECK(e2b_req_limit("5", &limit, &e) == 0 && limit == 5, "limit 5");
	CHECK(e2b_req_limit("0", &limit, &e) < 0 && e2b_req_limit("-1", &limit, &e) < 0 &&
		      e2b_req_limit("100000", &limit, &e) < 0 && e2b_req_limit("5x", &limit, &e) < 0,
	      "bad limits refused");
}

static void test_render(void)
{
	struct sandbox_rec sb = { .id = "sb-0123456789abcdef", .state = SB_SUSPENDED, .template_ref = "base:latest",
				  .vcpus = 2, .memory_mib = 512, .created_ms = 1000, .expires_ms = 0 };
	json_t *j;
	char stat[512], url[64];

	CHECK(e2b_state_of(SB_RUNNING) == E2B_RUNNING && e2b_state_of(SB_CREATING) == E2B_RUNNING &&
		      e2b_state_of(SB_SUSPENDED) == E2B_PAUSED && e2b_state_of(SB_PAUSED) == E2B_PAUSED &&
		      e2b_state_of(SB_DELETED) == E2B_NONE && e2b_state_of(SB_FAILED) == E2B_NONE,
	      "states map onto running / paused / not shown");
	sb.metadata = json_pack("{s:s}", "a", "b");
	j = e2b_sandbox_json(&sb, 100);
	CHECK(j && !strcmp(json_string_value(json_object_get(j, "state")), "paused") &&
		      !strcmp(json_string_value(json_object_get(j, "alias")), "base") &&
		      !strcmp(json_string_value(json_object_get(j, "templateID")), "base:latest") &&
		      json_is_null(json_object_get(j, "endAt")) &&
		      json_integer_value(json_object_get(j, "diskSizeMB")) == 100 &&
		      json_equal(json_object_get(j, "metadata"), sb.metadata),
	      "sandbox shape");
	json_decref(j);
	j = e2b_created_json(&sb, "tok", "localhost:7071");
	CHECK(j && !strcmp(json_string_value(json_object_get(j, "envdAccessToken")), "tok") &&
		      !strcmp(json_string_value(json_object_get(j, "trafficAccessToken")), "tok") &&
		      !strcmp(json_string_value(json_object_get(j, "domain")), "localhost:7071") &&
		      !strcmp(json_string_value(json_object_get(j, "envdVersion")), E2B_ENVD_VERSION),
	      "created shape: the same token twice, the ports' domain");
	json_decref(j);
	sandbox_rec_clear(&sb);

	/* /proc/<pid>/stat: comm with a space and a parenthesis; utime 300 stime 100 ticks,
	 * starttime 1000, rss 2560 pages. */
	snprintf(stat, sizeof(stat),
		 "4242 (qemu (x) y) S 1 2 3 0 -1 4 5 6 7 8 300 100 0 0 20 0 3 0 1000 123456 2560 18446744073709551615");
	sb.vcpus = 1;
	j = e2b_metrics_json(stat, 1000, 30.0, 100, 4096, &sb, 4096, 5000);
	CHECK(j && json_integer_value(json_object_get(j, "memUsed")) == 2560 * 4096 &&
		      json_integer_value(json_object_get(j, "memTotal")) == 512ll << 20 &&
		      json_real_value(json_object_get(j, "cpuUsedPct")) == 20.0 &&
		      json_integer_value(json_object_get(j, "diskUsed")) == 4096,
	      "metrics from stat: 4 s of CPU over 20 s alive = 20%%, RSS in bytes");
	json_decref(j);
	CHECK(!e2b_metrics_json(stat, 999, 30.0, 100, 4096, &sb, -1, 5000), "a reused pid gives no metrics");
	CHECK(!e2b_metrics_json("garbage", 1000, 30.0, 100, 4096, &sb, -1, 5000), "unparsable stat gives none");
	e2b_api_url("127.0.0.1:7070", url, sizeof(url));
	CHECK(!strcmp(url, "http://127.0.0.1:7070"), "api url %s", url);
	e2b_api_url(":7070", url, sizeof(url));
	CHECK(!strcmp(url, "http://127.0.0.1:7070"), "api url for every address %s", url);
}

int main(void)
{
	RUN(test_create);
	RUN(test_network);
	RUN(test_network_back);
	RUN(test_timeouts_fork_snapshot);
	RUN(test_queries);
	RUN(test_render);
	return DONE();
}
