/* test_egress_policy.c -- the egress policy: parsing with precise errors, normalisation,
 * matching (names, wildcards, CIDRs, ports, deny), inject rules and reserved ranges
 * (src/egress/policy.c, docs/design/egress.md). */
#include <string.h>

#include "egress/policy.h"
#include "egress/rules.h"
#include "harness.h"

static struct egress_policy *parse(const char *text, bool with_values, space_err *err)
{
	json_error_t jerr;
	json_t *j = json_loads(text, JSON_DECODE_ANY, &jerr);
	struct egress_policy *p = NULL;

	err_clear(err);
	if (!j) {
		NOTE("bad test JSON: %s", jerr.text);
		return NULL;
	}
	if (egress_policy_parse(j, with_values, &p, err) < 0)
		p = NULL;
	json_decref(j);
	return p;
}

/* The error for `text`, or "" if it parsed. */
static const char *parse_error(const char *text, bool with_values)
{
	static space_err err;
	struct egress_policy *p = parse(text, with_values, &err);

	if (p) {
		egress_policy_free(p);
		return "";
	}
	return err.msg;
}

static void errors(void)
{
	EXPECT(strcmp(parse_error("[]", false), "policy: not an object") == 0);
	EXPECT(strcmp(parse_error("{\"allowed\":[]}", false), "unknown key \"allowed\" (allow, deny, inject)") == 0);
	EXPECT(strcmp(parse_error("{\"allow\":\"a.com\"}", false), "allow: not an array") == 0);
	EXPECT(strcmp(parse_error("{\"allow\":[\"a.com\", 5]}", false), "allow[1]: not a string or an object") == 0);
	EXPECT(strcmp(parse_error("{\"deny\":[{\"name\":\"a.com\"}]}", false), "deny[0]: not a string") == 0);
	EXPECT(strcmp(parse_error("{\"allow\":[\"a.com\",\"10.0.0.0/33\"]}", false),
		      "allow[1]: bad CIDR \"10.0.0.0/33\": prefix length must be 0..32") == 0);
	EXPECT(strcmp(parse_error("{\"allow\":[\"10.0.0.1/8\"]}", false),
		      "allow[0]: bad CIDR \"10.0.0.1/8\": host bits set") == 0);
	EXPECT(strcmp(parse_error("{\"allow\":[\"300.1.1.1\"]}", false),
		      "allow[0]: bad CIDR \"300.1.1.1\": not an IPv4 address") == 0);
	EXPECT(strcmp(parse_error("{\"deny\":[\"a.com:0\"]}", false),
		      "deny[0]: bad port in \"a.com:0\" (1..65535)") == 0);
	EXPECT(strcmp(parse_error("{\"deny\":[\"a.com:65536\"]}", false),
		      "deny[0]: bad port in \"a.com:65536\" (1..65535)") == 0);
	EXPECT(strcmp(parse_error("{\"allow\":[\"a..com\"]}", false), "allow[0]: bad name \"a..com\"") == 0);
	EXPECT(strcmp(parse_error("{\"allow\":[\"*.\"]}", false), "allow[0]: bad wildcard \"*.\"") == 0);
	EXPECT(strcmp(parse_error("{\"allow\":[\"a*.com\"]}", false), "allow[0]: bad name \"a*.com\"") == 0);
	EXPECT(strcmp(parse_error("{\"allow\":[\"\"]}", false),
		      "allow[0]: bad entry \"\": empty or too long") == 0);
	EXPECT(strcmp(parse_error("{\"allow\":[\"01.2.3.4\"]}", false),
		      "allow[0]: bad CIDR \"01.2.3.4\": not an IPv4 address") == 0);
	EXPECT(*parse_error("null", false) == '\0');
	EXPECT(*parse_error("{}", false) == '\0');
}

static void limits(void)
{
	char big[EGRESS_MAX_ENTRIES * 8 + 64], *w = big;
	char label[70], name[300];

	w += sprintf(w, "{\"allow\":[");
	for (int i = 0; i <= EGRESS_MAX_ENTRIES; i++)
		w += sprintf(w, "%s\"a%d\"", i ? "," : "", i);
	sprintf(w, "]}");
	EXPECT(strcmp(parse_error(big, false), "allow: more than 256 entries") == 0);
	memset(label, 'x', 64);
	label[64] = '\0';
	snprintf(name, sizeof(name), "{\"allow\":[\"%s.com\"]}", label);
	EXPECT(strncmp(parse_error(name, false), "allow[0]: bad name", 18) == 0);
	label[63] = '\0';
	snprintf(name, sizeof(name), "{\"allow\":[\"%s.com\"]}", label);
	EXPECT(*parse_error(name, false) == '\0');
}

static void normalise(void)
{
	char out[EGRESS_NAME_MAX + 1], long_name[300];

	EXPECT(egress_name_normalise("PyPI.Org.", out) && strcmp(out, "pypi.org") == 0);
	EXPECT(egress_name_normalise("a_b-c.d", out) && strcmp(out, "a_b-c.d") == 0);
	EXPECT(!egress_name_normalise("", out));
	EXPECT(!egress_name_normalise(".", out));
	EXPECT(!egress_name_normalise(".a.com", out));
	EXPECT(!egress_name_normalise("a.com..", out));
	EXPECT(!egress_name_normalise("a b.com", out));
	EXPECT(!egress_name_normalise("a\xc3\xa9.com", out));
	EXPECT(!egress_name_normalise(NULL, out));
	for (int i = 0; i < 254; i++)
		long_name[i] = (i % 2) ? '.' : 'a';
	long_name[253] = '\0'; /* 253 bytes, ends in 'a' */
	EXPECT(egress_name_normalise(long_name, out));
	long_name[253] = 'a';
	long_name[254] = 'a';
	long_name[255] = '\0';
	EXPECT(!egress_name_normalise(long_name, out));
}

static void matching(void)
{
	space_err err;
	struct egress_policy *p = parse("{\"allow\":[\"Exact.COM.\",\"*.a.com\",\"api.b.com:443\","
					"\"203.0.113.0/24\",\"198.51.100.7:22\"],"
					"\"deny\":[\"bad.a.com\",\"*.x.a.com\",\"203.0.113.9\",\"exact.com:25\"]}",
					false, &err);
	struct egress_verdict v;

	if (!CHECK(p, "parse: %s", err.msg))
		return;
	v = egress_check_name(p, "exact.com", 80);
	EXPECT(v.allow && strcmp(v.reason, "allowed by exact.com") == 0);
	EXPECT(egress_check_name(p, "x.a.com", 443).allow);
	EXPECT(strcmp(egress_check_name(p, "q.a.com", 0).reason, "allowed by *.a.com") == 0);
	EXPECT(!egress_check_name(p, "a.com", 443).allow);       /* not the bare suffix */
	EXPECT(!egress_check_name(p, "xa.com", 443).allow);      /* a label boundary */
	v = egress_check_name(p, "bad.a.com", 443);
	EXPECT(!v.allow && strcmp(v.reason, "denied by bad.a.com") == 0);
	EXPECT(!egress_check_name(p, "y.x.a.com", 443).allow);  /* denied by *.x.a.com */
	EXPECT(egress_check_name(p, "x.a.com", 443).allow);     /* *.x.a.com needs one more label */
	v = egress_check_name(p, "nope.com", 443);
	EXPECT(!v.allow && strcmp(v.reason, "not allowed") == 0);
	/* ports */
	EXPECT(egress_check_name(p, "api.b.com", 443).allow);
	EXPECT(!egress_check_name(p, "api.b.com", 80).allow);
	EXPECT(egress_check_name(p, "api.b.com", 0).allow);     /* resolving: any port counts */
	EXPECT(!egress_check_name(p, "exact.com", 25).allow);   /* a port deny */
	EXPECT(egress_check_name(p, "exact.com", 0).allow);     /* ... does not hide the name */
	EXPECT(egress_name_has_port(p, "api.b.com", 443));
	EXPECT(!egress_name_has_port(p, "api.b.com", 80));
	EXPECT(!egress_name_has_port(p, "exact.com", 80));
	/* CIDR */
	v = egress_check_addr(p, 0xcb007101u, 5000); /* 203.0.113.1 */
	EXPECT(v.allow && strcmp(v.reason, "allowed by 203.0.113.0/24") == 0);
	EXPECT(!egress_check_addr(p, 0xcb007109u, 80).allow);  /* 203.0.113.9 denied */
	EXPECT(!egress_check_addr(p, 0xcb007201u, 80).allow);  /* 203.0.114.1 */
	EXPECT(egress_check_addr(p, 0xc6336407u, 22).allow);   /* 198.51.100.7:22 */
	EXPECT(!egress_check_addr(p, 0xc6336407u, 23).allow);
	egress_policy_free(p);
}

static void deny_wins_and_empty(void)
{
	space_err err;
	struct egress_policy *p = parse("{\"allow\":[\"*.a.com\",\"0.0.0.0/0\"],\"deny\":[\"*.a.com\","
					"\"0.0.0.0/0\"]}", false, &err);

	if (!CHECK(p, "parse: %s", err.msg))
		return;
	EXPECT(!egress_check_name(p, "x.a.com", 443).allow);
	EXPECT(!egress_check_addr(p, 0x01020304u, 443).allow);
	egress_policy_free(p);
	p = parse("null", false, &err);
	if (!CHECK(p, "null policy: %s", err.msg))
		return;
	EXPECT(!egress_check_name(p, "a.com", 0).allow);
	EXPECT(!egress_check_addr(p, 0x01020304u, 443).allow);
	egress_policy_free(p);
}

static void inject_rules(void)
{
	static const char *bad[][2] = {
		{ "{\"inject\":[{\"host\":\"a.com\",\"header\":\"Host\",\"secret\":\"s\"}]}",
		  "inject[0].header: missing, not an HTTP token, or not allowed (Host, Content-Length, "
		  "Transfer-Encoding, Connection)" },
		{ "{\"inject\":[{\"host\":\"a.com\",\"header\":\"X Y\",\"secret\":\"s\"}]}", "inject[0].header:" },
		{ "{\"inject\":[{\"host\":\"a.com\",\"header\":\"transfer-encoding\",\"secret\":\"s\"}]}",
		  "inject[0].header:" },
		{ "{\"inject\":[{\"host\":\"a.com\",\"header\":\"X\",\"secret\":\"s/x\"}]}",
		  "inject[0].secret: missing or not [A-Za-z0-9_.-]{1,64}" },
		{ "{\"inject\":[{\"host\":\"a.com:443\",\"header\":\"X\",\"secret\":\"s\"}]}",
		  "inject[0].host: \"a.com:443\" must be a name or *.suffix without a port" },
		{ "{\"inject\":[{\"host\":\"1.2.3.4\",\"header\":\"X\",\"secret\":\"s\"}]}", "inject[0].host:" },
		{ "{\"inject\":[{\"header\":\"X\",\"secret\":\"s\"}]}", "inject[0].host: missing or not a string" },
		{ "{\"inject\":[{\"host\":\"a.com\",\"header\":\"X\",\"secret\":\"s\",\"prefix\":\"a\\r\\nb\"}]}",
		  "inject[0].prefix: not printable text of at most 256 bytes" },
		{ "{\"inject\":[{\"host\":\"a.com\",\"header\":\"X\",\"secret\":\"s\",\"value\":\"v\"}]}",
		  "inject[0]: unknown key \"value\"" },
		{ "{\"inject\":[{\"host\":\"a.com\",\"header\":\"X\",\"secret\":\"s\",\"plain_http\":1}]}",
		  "inject[0].plain_http: not a boolean" },
		{ "{\"inject\":[5]}", "inject[0]: not an object" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *e = parse_error(bad[i][0], false);

		if (strncmp(e, bad[i][1], strlen(bad[i][1])) != 0) {
			h_cur = 1;
			NOTE("case %zu: got \"%s\"", i, e);
		}
	}
	EXPECT(strcmp(parse_error("{\"inject\":[{\"host\":\"a.com\",\"header\":\"X\",\"secret\":\"s\","
				  "\"value\":\"a\\nb\"}]}", true), "inject[0].value: not a valid header value") == 0);
	EXPECT(egress_secret_name_valid("GH_token.v-1"));
	EXPECT(!egress_secret_name_valid(""));
	EXPECT(!egress_secret_value_valid("a\0b", 3));
	EXPECT(egress_secret_value_valid("abc", 3));
}

static void injects_for(void)
{
	space_err err;
	const struct egress_inject *r[EGRESS_MAX_INJECT + 1];
	struct egress_policy *p = parse(
		"{\"inject\":[{\"host\":\"API.a.com\",\"header\":\"Authorization\",\"secret\":\"tok\","
		"\"prefix\":\"Bearer \",\"value\":\"Bearer xyz\"},"
		"{\"host\":\"*.a.com\",\"header\":\"X-Key\",\"secret\":\"k\",\"plain_http\":true}]}", true, &err);

	if (!CHECK(p, "parse: %s", err.msg))
		return;
	EXPECT_EQ(egress_injects_for(p, "api.a.com", r), 2);
	EXPECT(strcmp(r[0]->header, "Authorization") == 0 && strcmp(r[0]->value, "Bearer xyz") == 0);
	EXPECT(r[1]->value == NULL && r[1]->plain_http && r[2] == NULL);
	EXPECT_EQ(egress_injects_for(p, "a.com", r), 0);
	EXPECT(r[0] == NULL);
	egress_policy_free(p);
}

static void round_trip(void)
{
	space_err err;
	const char *text = "{\"allow\":[\"PyPI.org.\",\"*.GitHubUserContent.com\",\"203.0.113.0/24\","
			   "\"api.example.com:443\",\"1.2.3.4/32:22\"],\"deny\":[\"evil.example.com\"],"
			   "\"inject\":[{\"host\":\"api.example.com\",\"header\":\"Authorization\","
			   "\"secret\":\"example-token\",\"prefix\":\"Bearer \",\"value\":\"Bearer s3cret\"}]}";
	struct egress_policy *p = parse(text, true, &err), *q = NULL;
	char *a = NULL, *b = NULL, *c = NULL;
	json_t *j, *k;

	if (!CHECK(p, "parse: %s", err.msg))
		return;
	j = egress_policy_json(p, false);
	a = json_dumps(j, JSON_COMPACT);
	EXPECT(strcmp(a, "{\"allow\":[\"pypi.org\",\"*.githubusercontent.com\",\"203.0.113.0/24\","
			 "\"api.example.com:443\",\"1.2.3.4:22\"],\"deny\":[\"evil.example.com\"],"
			 "\"inject\":[{\"host\":\"api.example.com\",\"header\":\"Authorization\","
			 "\"secret\":\"example-token\",\"prefix\":\"Bearer \"}]}") == 0);
	EXPECT(strstr(a, "s3cret") == NULL);
	EXPECT(egress_policy_parse(j, false, &q, &err) == 0);
	k = egress_policy_json(q, false);
	b = json_dumps(k, JSON_COMPACT);
	EXPECT(strcmp(a, b) == 0);
	json_decref(k);
	k = egress_policy_json(p, true);
	c = json_dumps(k, JSON_COMPACT);
	EXPECT(strstr(c, "\"value\":\"Bearer s3cret\"") != NULL);
	json_decref(k);
	json_decref(j);
	free(a);
	free(b);
	free(c);
	egress_policy_free(q);
	egress_policy_free(p);
}

/* An allow entry marked "tls": "passthrough" (TLS it allows is relayed untouched): parsed,
 * carried into the verdict of the entry that allowed, shown as an object, refused elsewhere. */
static void passthrough(void)
{
	static const char *bad[][2] = {
		{ "{\"allow\":[{\"name\":\"a.com\",\"tls\":\"pass\"}]}",
		  "allow[0].tls: must be \"passthrough\" or \"intercept\"" },
		{ "{\"allow\":[{\"name\":\"a.com\",\"tls\":true}]}", "allow[0].tls: must be" },
		{ "{\"allow\":[{\"tls\":\"passthrough\"}]}", "allow[0].name: missing or not a string" },
		{ "{\"allow\":[\"b.com\",{\"name\":\"a.com\",\"pin\":1}]}", "allow[1]: unknown key \"pin\" (name, tls)" },
		{ "{\"allow\":[{\"name\":\"a..com\",\"tls\":\"passthrough\"}]}", "allow[0]: bad name \"a..com\"" },
	};
	space_err err;
	struct egress_policy *p;
	struct egress_verdict v;
	json_t *j;
	char *text;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *e = parse_error(bad[i][0], false);

		if (strncmp(e, bad[i][1], strlen(bad[i][1])) != 0) {
			h_cur = 1;
			NOTE("case %zu: got \"%s\"", i, e);
		}
	}
	p = parse("{\"allow\":[{\"name\":\"Pinned.Example:443\",\"tls\":\"passthrough\"},"
		  "{\"name\":\"*.cdn.test\",\"tls\":\"intercept\"},\"plain.test\","
		  "{\"name\":\"203.0.113.0/24\",\"tls\":\"passthrough\"}]}", false, &err);
	if (!CHECK(p, "parse: %s", err.msg))
		return;
	v = egress_check_name(p, "pinned.example", 443);
	EXPECT(v.allow && v.passthrough && strcmp(v.reason, "allowed by pinned.example:443") == 0);
	EXPECT(!egress_check_name(p, "pinned.example", 80).allow);
	v = egress_check_name(p, "a.cdn.test", 443);
	EXPECT(v.allow && !v.passthrough);
	v = egress_check_name(p, "plain.test", 443);
	EXPECT(v.allow && !v.passthrough);
	v = egress_check_addr(p, 0xcb007105u, 443);
	EXPECT(v.allow && v.passthrough);
	v = egress_check_name(p, "other.test", 443);
	EXPECT(!v.allow && !v.passthrough);
	j = egress_policy_json(p, false);
	text = json_dumps(json_object_get(j, "allow"), JSON_COMPACT);
	EXPECT(strcmp(text, "[{\"name\":\"pinned.example:443\",\"tls\":\"passthrough\"},\"*.cdn.test\","
			    "\"plain.test\",{\"name\":\"203.0.113.0/24\",\"tls\":\"passthrough\"}]") == 0);
	free(text);
	json_decref(j);
	egress_policy_free(p);
}

/* The node's refused ranges (spaced --egress-refuse): parsed with precise errors, matched. */
static void refuse_list(void)
{
	static const char *bad[][2] = {
		{ "10.244.0.0/16,", "refuse[1]: empty" },
		{ ",10.0.0.0/8", "refuse[0]: \"\" is not an IPv4 CIDR" },
		{ "10.244.0.1/16", "refuse[0]: bad CIDR \"10.244.0.1/16\": host bits set" },
		{ "10.96.0.0/12,cluster.local", "refuse[1]: \"cluster.local\" is not an IPv4 CIDR" },
		{ "10.0.0.0/8:443", "refuse[0]: \"10.0.0.0/8:443\" is not an IPv4 CIDR" },
		{ "10.0.0.0/33", "refuse[0]: bad CIDR \"10.0.0.0/33\": prefix length must be 0..32" },
	};
	struct egress_cidrs l;
	space_err err;
	char many[EGRESS_REFUSE_MAX * 16 + 32], *w = many;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err_clear(&err);
		if (egress_cidrs_parse(bad[i][0], &l, &err) == 0 || strcmp(err.msg, bad[i][1]) != 0) {
			h_cur = 1;
			NOTE("case %zu: got \"%s\"", i, err.msg);
		}
	}
	EXPECT(egress_cidrs_parse("", &l, &err) == 0 && l.n == 0);
	EXPECT(egress_cidrs_parse(NULL, &l, &err) == 0 && l.n == 0);
	EXPECT(!egress_cidrs_match(&l, 0x0af40001u));
	if (!CHECK(egress_cidrs_parse("10.244.0.0/16,10.96.0.0/12,203.0.113.7", &l, &err) == 0, "parse: %s", err.msg))
		return;
	EXPECT_EQ(l.n, 3);
	EXPECT(egress_cidrs_match(&l, 0x0af40a05u) == &l.e[0]);                       /* 10.244.10.5 */
	EXPECT(egress_cidrs_match(&l, 0x0a6fffffu) && strcmp(egress_cidrs_match(&l, 0x0a6fffffu)->text,
								  "10.96.0.0/12") == 0); /* 10.111.255.255 */
	EXPECT(!egress_cidrs_match(&l, 0x0a700000u));                                  /* 10.112.0.0 */
	EXPECT(!egress_cidrs_match(&l, 0x0af50000u));                                  /* 10.245.0.0 */
	EXPECT(egress_cidrs_match(&l, 0xcb007107u) == &l.e[2]);
	EXPECT(!egress_cidrs_match(&l, 0xcb007108u));
	for (int i = 0; i <= EGRESS_REFUSE_MAX; i++)
		w += sprintf(w, "%s10.%d.0.0/16", i ? "," : "", i);
	EXPECT(egress_cidrs_parse(many, &l, &err) < 0 && strcmp(err.msg, "more than 64 CIDRs") == 0);
}

static void reserved_ranges(void)
{
	static const uint32_t in[] = { 0x00000001u, 0x0a010203u, 0x64400001u, 0x647fffffu, 0x7f000001u,
				       0xa9fea9feu, 0xac100001u, 0xac1fffffu, 0xc0a80101u, 0xe0000001u,
				       0xffffffffu, EGRESS_GW_ADDR };
	static const uint32_t out[] = { 0x08080808u, 0x64800000u, 0xac200000u, 0xc6336401u, 0xdfffffffu };
	space_err err;
	struct egress_policy *p;

	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
		EXPECT(egress_addr_reserved(in[i]));
	for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++)
		EXPECT(!egress_addr_reserved(out[i]));
	p = parse("{\"allow\":[\"0.0.0.0/0\",\"10.1.0.0/16:5432\",\"198.51.100.1\"],"
		  "\"deny\":[\"10.1.2.0/24\"]}", false, &err);
	if (!CHECK(p, "parse: %s", err.msg))
		return;
	EXPECT(!egress_cidr_names(p, 0x7f000001u, 80));     /* 0/0 names no reserved block */
	EXPECT(egress_cidr_names(p, 0x0a010101u, 5432));
	EXPECT(!egress_cidr_names(p, 0x0a010101u, 80));     /* port */
	EXPECT(!egress_cidr_names(p, 0x0a010203u, 5432));   /* denied */
	EXPECT(egress_cidr_names(p, 0xc6336401u, 80));      /* a host address named by /32 */
	EXPECT(!egress_cidr_names(p, 0xc6336402u, 80));     /* ... only by /32 */
	egress_policy_free(p);
}

/* "*": every name of two labels or more, still a name rule (no address without a CIDR), never
 * an inject host; the most specific entry names the reason; deny names and CIDRs win. */
static void any_name(void)
{
	space_err err;
	struct egress_policy *p = parse("{\"allow\":[\"*\"]}", false, &err);
	struct egress_verdict v;
	json_t *j;
	char *s;

	if (!CHECK(p, "parse: %s", err.msg))
		return;
	v = egress_check_name(p, "files.pythonhosted.org", 0);
	EXPECT(v.allow && v.any_name && strcmp(v.reason, "allowed by *") == 0);
	EXPECT(egress_check_name(p, "github.com", 443).allow);
	EXPECT(!egress_check_name(p, "localhost", 0).allow); /* a single label is no public name */
	EXPECT(!egress_check_addr(p, 0xc6336414u, 443).allow); /* a name rule opens no address */
	EXPECT(!egress_cidr_names(p, 0x0a010203u, 443));
	j = egress_policy_json(p, false);
	s = j ? json_dumps(json_object_get(j, "allow"), JSON_COMPACT) : NULL;
	EXPECT(s && strcmp(s, "[\"*\"]") == 0);
	free(s);
	json_decref(j);
	egress_policy_free(p);

	/* E2B's internet: every public address and every name, denyOut's name and CIDR winning */
	p = parse("{\"allow\":[\"0.0.0.0/0\",\"*\",\"pypi.org:443\"],\"deny\":[\"blocked.example\","
		  "\"*.evil.example\",\"203.0.113.0/24\"]}", false, &err);
	if (!CHECK(p, "parse: %s", err.msg))
		return;
	v = egress_check_name(p, "pypi.org", 443);
	EXPECT(v.allow && !v.any_name && strcmp(v.reason, "allowed by pypi.org:443") == 0);
	EXPECT(egress_check_name(p, "pypi.org", 80).any_name);
	v = egress_check_name(p, "blocked.example", 0);
	EXPECT(!v.allow && strcmp(v.reason, "denied by blocked.example") == 0);
	EXPECT(!egress_check_name(p, "blocked.example", 443).allow);
	EXPECT(!egress_check_name(p, "a.evil.example", 0).allow);
	EXPECT(egress_check_name(p, "evil.example", 0).allow); /* the wildcard's apex is not below it */
	v = egress_check_addr(p, 0xcb007105u, 443); /* 203.0.113.5 */
	EXPECT(!v.allow && strcmp(v.reason, "denied by 203.0.113.0/24") == 0);
	EXPECT(egress_check_addr(p, 0xc6336414u, 443).allow); /* 198.51.100.20 */
	/* reserved blocks stay closed: 0.0.0.0/0 names none of them */
	EXPECT(egress_addr_reserved(0x0a010203u) && !egress_cidr_names(p, 0x0a010203u, 443));
	EXPECT(egress_addr_reserved(0xa9fea9feu) && !egress_cidr_names(p, 0xa9fea9feu, 80));
	EXPECT(egress_addr_reserved(0x7f000001u) && !egress_cidr_names(p, 0x7f000001u, 80));
	egress_policy_free(p);

	p = parse("{\"allow\":[\"*:443\", {\"name\": \"*\", \"tls\": \"passthrough\"}],\"deny\":[\"*:25\"]}",
		  false, &err);
	if (CHECK(p, "ports and objects: %s", err.msg)) {
		EXPECT(strcmp(p->allow[0].text, "*:443") == 0 && p->allow[0].kind == EGRESS_ANY);
		EXPECT(egress_check_name(p, "a.example", 25).allow == false);
		EXPECT(egress_check_name(p, "a.example", 443).allow);
		EXPECT(egress_check_name(p, "a.example", 80).passthrough);
		egress_policy_free(p);
	}
	EXPECT(strcmp(parse_error("{\"allow\":[\"**\"]}", false), "allow[0]: bad name \"**\"") == 0);
	EXPECT(strcmp(parse_error("{\"allow\":[\"*:0\"]}", false), "allow[0]: bad port in \"*:0\" (1..65535)") == 0);
	EXPECT(strncmp(parse_error("{\"inject\":[{\"host\":\"*\",\"header\":\"X\",\"secret\":\"s\"}]}", false),
		       "inject[0]: bad name \"*\"", 26) == 0);
}

int main(void)
{
	RUN(errors);
	RUN(limits);
	RUN(normalise);
	RUN(matching);
	RUN(deny_wins_and_empty);
	RUN(inject_rules);
	RUN(injects_for);
	RUN(round_trip);
	RUN(reserved_ranges);
	RUN(passthrough);
	RUN(refuse_list);
	RUN(any_name);
	return DONE();
}
