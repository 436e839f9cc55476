/* test_egress_binding.c -- a secret's hosts (egress/binding.h): parsing and normalising the
 * list, and which inject rule hosts it covers (a name below a wildcard, never the wildcard's
 * own apex, never a wider wildcard). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress/binding.h"
#include "harness.h"

static json_t *parsed(const char *text)
{
	json_t *in = json_loads(text, 0, NULL), *out = NULL;
	space_err err = { 0 };

	if (egress_binding_parse(in, &out, &err) < 0)
		out = NULL;
	json_decref(in);
	return out;
}

static struct egress_entry host(const char *h)
{
	struct egress_entry e = { 0 };
	json_t *p = json_pack("{s:[],s:[{s:s,s:s,s:s}]}", "allow", "inject", "host", h, "header", "X-Key", "secret",
			      "s");
	struct egress_policy *pol = NULL;
	space_err err = { 0 };

	if (egress_policy_parse(p, false, &pol, &err) == 0 && pol->ninject == 1)
		e = pol->inject[0].host;
	egress_policy_free(pol);
	json_decref(p);
	return e;
}

static void test_parse(void)
{
	json_t *b = parsed("[\"API.Example.com\", \"api.example.com.\", \"*.Example.ORG\"]");
	char *s = b ? json_dumps(b, JSON_COMPACT) : NULL;
	space_err err = { 0 };
	json_t *out = NULL, *in;

	EXPECT(s && strcmp(s, "[\"api.example.com\",\"*.example.org\"]") == 0);
	free(s);
	json_decref(b);
	static const char *const bad[] = { "[]", "\"a.example\"", "null", "[\"10.0.0.1\"]", "[\"a.example:443\"]",
					   "[\"*\"]", "[\"bad host\"]", "[1]", "[\"0.0.0.0/0\"]",
					   "[{\"name\": \"a.example\", \"tls\": \"passthrough\"}]" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b = parsed(bad[i]);
		EXPECT(b == NULL);
		json_decref(b);
	}
	in = json_array();
	for (int i = 0; i <= EGRESS_BINDING_MAX; i++) {
		char n[32];
		snprintf(n, sizeof(n), "h%d.example", i);
		json_array_append_new(in, json_string(n));
	}
	EXPECT(egress_binding_parse(in, &out, &err) < 0 && strstr(err.msg, "1 to 32"));
	json_decref(in);
	in = json_loads("[\"ok.example\", \"bad host\"]", 0, NULL);
	EXPECT(egress_binding_parse(in, &out, &err) < 0 && strncmp(err.msg, "hosts[1]", 8) == 0);
	json_decref(in);
}

static void test_covers(void)
{
	json_t *b = parsed("[\"api.stripe.com\", \"*.stripe.net\"]");
	struct egress_entry e;

	static const char *const yes[] = { "api.stripe.com", "x.stripe.net", "a.b.stripe.net", "*.stripe.net",
					   "*.eu.stripe.net" };
	static const char *const no[] = { "stripe.com", "evil.example", "api.stripe.com.evil.example",
					  "xapi.stripe.com", "stripe.net", "*.stripe.com", "*.net", "xstripe.net" };
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		e = host(yes[i]);
		EXPECT(egress_binding_covers(b, &e));
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		e = host(no[i]);
		EXPECT(!egress_binding_covers(b, &e));
	}
	e = host("api.stripe.com");
	json_t *empty = json_array();
	EXPECT(!egress_binding_covers(empty, &e));
	EXPECT(!egress_binding_covers(NULL, &e));
	json_decref(empty);
	json_decref(b);
}

static void test_check(void)
{
	json_t *b = parsed("[\"api.stripe.com\"]"), *empty = json_array();
	json_t *net = json_loads("{\"allow\":[\"api.stripe.com\",\"evil.example\"],\"inject\":["
				 "{\"host\":\"api.stripe.com\",\"header\":\"Authorization\",\"secret\":\"stripe\"},"
				 "{\"host\":\"api.stripe.com\",\"header\":\"X-Other\",\"secret\":\"other\"},"
				 "{\"host\":\"evil.example\",\"header\":\"Authorization\",\"secret\":\"stripe\"}]}",
				 0, NULL);
	space_err err = { 0 };

	EXPECT(egress_binding_check(net, "other", b, &err) == 0);
	EXPECT(egress_binding_check(net, "stripe", b, &err) < 0 && err.code == EINVAL);
	EXPECT(strstr(err.msg, "inject[2]") && strstr(err.msg, "stripe") && strstr(err.msg, "evil.example") &&
	       strstr(err.msg, "api.stripe.com"));
	EXPECT(egress_binding_check(net, "other", empty, &err) < 0 && strstr(err.msg, "no host"));
	json_decref(net);
	json_decref(b);
	json_decref(empty);
}

int main(void)
{
	RUN(test_parse);
	RUN(test_covers);
	RUN(test_check);
	return harness_done();
}
