/* test_events.c -- lifecycle events' pure parts: type names and filters, which state changes
 * are events (events/event_types.c), an event's JSON both ways; webhooks' URL parser and the
 * addresses a delivery may reach (events/webhook_url.c), signatures against vectors computed
 * independently (Python's hmac/hashlib), the retry backoff (events/webhook_sign.c). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "events/events.h"
#include "events/webhook.h"
#include "harness.h"

static void test_type_names(void)
{
	unsigned mask;
	space_err err = { 0 };

	EXPECT(strcmp(ev_type_name(EVT_CREATED), "sandbox.created") == 0);
	EXPECT(strcmp(ev_type_name(EVT_TIMEOUT_WARNING), "sandbox.timeout_warning") == 0);
	EXPECT_EQ(ev_type_parse("deleted"), EVT_DELETED);
	EXPECT_EQ(ev_type_parse("sandbox.deleted"), EVT_DELETED);
	EXPECT_EQ(ev_type_parse("sandbox."), -1);
	EXPECT_EQ(ev_type_parse("Deleted"), -1);
	EXPECT_EQ(ev_type_parse(NULL), -1);
	for (int t = 0; t < EVT__COUNT; t++)
		EXPECT_EQ(ev_type_parse(ev_type_name(t)), t);
	EXPECT_EQ(ev_types_csv(NULL, &mask, &err), 0);
	EXPECT_EQ(mask, EVT_ALL);
	EXPECT_EQ(ev_types_csv("*", &mask, &err), 0);
	EXPECT_EQ(mask, EVT_ALL);
	EXPECT_EQ(ev_types_csv("created,sandbox.deleted", &mask, &err), 0);
	EXPECT_EQ(mask, (1u << EVT_CREATED) | (1u << EVT_DELETED));
	EXPECT_EQ(ev_types_csv("created,,deleted", &mask, &err), -1);
	EXPECT_EQ(ev_types_csv("created,nope", &mask, &err), -1);
	EXPECT(strstr(err.msg, "'nope'") != NULL);
	EXPECT_EQ(ev_types_csv("created,", &mask, &err), 0);
}

static void test_types_json(void)
{
	unsigned mask;
	space_err err = { 0 };
	json_t *j;

	EXPECT_EQ(ev_types_json(NULL, &mask, &err), 0);
	EXPECT_EQ(mask, EVT_ALL);
	j = json_pack("[s,s]", "sandbox.paused", "resumed");
	EXPECT_EQ(ev_types_json(j, &mask, &err), 0);
	EXPECT_EQ(mask, (1u << EVT_PAUSED) | (1u << EVT_RESUMED));
	json_decref(j);
	j = json_pack("[s,i]", "paused", 3);
	EXPECT_EQ(ev_types_json(j, &mask, &err), -1);
	EXPECT(strstr(err.msg, "events[1]") != NULL);
	json_decref(j);
	j = json_array();
	EXPECT_EQ(ev_types_json(j, &mask, &err), -1);
	json_decref(j);
	j = json_string("created");
	EXPECT_EQ(ev_types_json(j, &mask, &err), -1);
	json_decref(j);
}

static void test_transitions(void)
{
	EXPECT_EQ(ev_for_transition(SB_CREATING, SB_RUNNING), EVT_RUNNING);
	EXPECT_EQ(ev_for_transition(SB_PAUSED, SB_RUNNING), EVT_RESUMED);
	EXPECT_EQ(ev_for_transition(SB_RESTORING, SB_RUNNING), EVT_RESTORED);
	EXPECT_EQ(ev_for_transition(SB_PAUSING, SB_PAUSED), EVT_PAUSED);
	EXPECT_EQ(ev_for_transition(SB_SUSPENDING, SB_SUSPENDED), EVT_SUSPENDED);
	EXPECT_EQ(ev_for_transition(SB_STOPPING, SB_STOPPED), EVT_STOPPED);
	EXPECT_EQ(ev_for_transition(SB_DELETING, SB_DELETED), EVT_DELETED);
	EXPECT_EQ(ev_for_transition(SB_RUNNING, SB_FAILED), EVT_FAILED);
	EXPECT_EQ(ev_for_transition(SB_RUNNING, SB_LOST), EVT_FAILED);
	/* An action that failed went back where it was: nothing happened. */
	EXPECT_EQ(ev_for_transition(SB_PAUSING, SB_RUNNING), -1);
	EXPECT_EQ(ev_for_transition(SB_SUSPENDING, SB_RUNNING), -1);
	EXPECT_EQ(ev_for_transition(SB_RESTORING, SB_SUSPENDED), -1);
	EXPECT_EQ(ev_for_transition(SB_STOPPING, SB_RUNNING), -1);
	/* The transient states are no events of their own. */
	EXPECT_EQ(ev_for_transition(SB_RUNNING, SB_PAUSING), -1);
	EXPECT_EQ(ev_for_transition(SB_RUNNING, SB_DELETING), -1);
	EXPECT_EQ(ev_for_transition(SB_SUSPENDED, SB_RESTORING), -1);
}

static void test_json_round_trip(void)
{
	struct sb_event e = { .seq = 42, .time_ms = 1700000000123, .type = EVT_FORKED }, back;
	space_err err = { 0 };
	json_t *j;

	snprintf(e.sandbox_id, sizeof(e.sandbox_id), "sb-0123456789abcdef");
	snprintf(e.template_ref, sizeof(e.template_ref), "base");
	snprintf(e.state, sizeof(e.state), "running");
	snprintf(e.reason, sizeof(e.reason), "why \"quoted\"");
	e.data = json_pack("{s:[s]}", "children", "sb-fedcba9876543210");
	j = event_json(&e);
	EXPECT(j != NULL);
	EXPECT(strcmp(json_string_value(json_object_get(j, "id")), "42") == 0);
	EXPECT(strcmp(json_string_value(json_object_get(j, "time")), "2023-11-14T22:13:20.123Z") == 0);
	EXPECT(json_is_null(json_object_get(j, "operation_id")));
	EXPECT_EQ(event_from_json(j, &back, &err), 0);
	EXPECT_EQ(back.seq, 42);
	EXPECT_EQ(back.time_ms, 1700000000123);
	EXPECT_EQ(back.type, EVT_FORKED);
	EXPECT(strcmp(back.reason, e.reason) == 0);
	EXPECT(strcmp(back.sandbox_id, e.sandbox_id) == 0);
	EXPECT(back.operation_id[0] == '\0');
	EXPECT(json_equal(back.data, e.data));
	event_clear(&back);
	json_object_set_new(j, "type", json_string("sandbox.nope"));
	EXPECT_EQ(event_from_json(j, &back, &err), -1);
	json_decref(j);
	j = json_string("x");
	EXPECT_EQ(event_from_json(j, &back, &err), -1);
	json_decref(j);
	event_clear(&e);
}

static int parse(const char *url, struct wh_url *u)
{
	space_err err = { 0 };

	return wh_url_parse(url, u, &err);
}

static void test_url(void)
{
	struct wh_url u;

	EXPECT_EQ(parse("https://hooks.example.com/in?x=1", &u), 0);
	EXPECT(u.tls && u.port == 443 && !u.host_is_ip);
	EXPECT(strcmp(u.host, "hooks.example.com") == 0 && strcmp(u.path, "/in?x=1") == 0);
	EXPECT_EQ(parse("HTTP://Hooks.Example.COM:8080", &u), 0);
	EXPECT(!u.tls && u.port == 8080 && strcmp(u.host, "hooks.example.com") == 0 && strcmp(u.path, "/") == 0);
	EXPECT_EQ(parse("http://127.0.0.1:9/x", &u), 0);
	EXPECT(u.host_is_ip && u.port == 9);
	EXPECT_EQ(parse("http://[::1]:8000/a", &u), 0);
	EXPECT(u.host_is_ip && strcmp(u.host, "::1") == 0 && u.port == 8000);
	EXPECT_EQ(parse("http://h?q", &u), 0);
	EXPECT(strcmp(u.path, "/?q") == 0);
	const char *bad[] = { "", "ftp://h/", "http://", "http:///x", "http://u:p@h/", "http://h:0/", "http://h:65536/",
			      "http://h:/", "http://h:80x/", "http://h/#frag", "http://h /", "http://h\x01/", "http://[::1/",
			      "http://[]/", "http://[nope]/", "http://h_h/", "javascript:alert(1)", "http://h:-1/" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		EXPECT_EQ(parse(bad[i], &u), -1);
	char longurl[WH_URL_MAX + 8];
	memset(longurl, 'a', sizeof(longurl));
	memcpy(longurl, "http://h/", 9);
	longurl[sizeof(longurl) - 1] = '\0';
	EXPECT_EQ(parse(longurl, &u), -1);
}

static int cls(const char *addr)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in s4 = { .sin_family = AF_INET };

	if (inet_pton(AF_INET, addr, &s4.sin_addr) == 1)
		return wh_addr_class((struct sockaddr *)&s4, NULL);
	if (inet_pton(AF_INET6, addr, &s6.sin6_addr) == 1)
		return wh_addr_class((struct sockaddr *)&s6, NULL);
	return -1;
}

static void test_addresses(void)
{
	const char *pub[] = { "1.1.1.1", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "11.0.0.1" };
	const char *lo[] = { "127.0.0.1", "127.255.255.254", "::1", "::ffff:127.0.0.1" };
	const char *refused[] = { "10.0.0.1",        "172.16.0.1",    "172.31.255.255", "192.168.1.1", "169.254.169.254",
				  "100.64.0.1",      "0.0.0.0",       "224.0.0.1",      "255.255.255.255", "198.18.0.1",
				  "198.51.100.7",    "203.0.113.9",   "fc00::1",        "fd12::1",     "fe80::1",
				  "ff02::1",         "::",            "::ffff:10.0.0.1", "::ffff:169.254.1.1", "2001:db8::1",
				  "64:ff9b::a00:1", "::10.0.0.1" };
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	space_err err = { 0 };

	for (size_t i = 0; i < sizeof(pub) / sizeof(pub[0]); i++)
		EXPECT_EQ(cls(pub[i]), WH_ADDR_PUBLIC);
	for (size_t i = 0; i < sizeof(lo) / sizeof(lo[0]); i++)
		EXPECT_EQ(cls(lo[i]), WH_ADDR_LOOPBACK);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		EXPECT_EQ(cls(refused[i]), WH_ADDR_REFUSED);
	inet_pton(AF_INET, "127.0.0.1", &s4.sin_addr);
	EXPECT_EQ(wh_addr_check((struct sockaddr *)&s4, false, &err), -1);
	EXPECT(strstr(err.msg, "--webhooks-allow-loopback") != NULL);
	EXPECT_EQ(wh_addr_check((struct sockaddr *)&s4, true, &err), 0);
	inet_pton(AF_INET, "10.9.8.7", &s4.sin_addr);
	EXPECT_EQ(wh_addr_check((struct sockaddr *)&s4, true, &err), -1);
	EXPECT(strstr(err.msg, "10.0.0.0/8") != NULL);
}

static void test_signatures(void)
{
	char hex[65], b64[48];

	/* Python: hmac.new(b"secret-key-1234567890", b'1700000000.{"a":1}', sha256).hexdigest() */
	EXPECT_EQ(wh_sign_space("secret-key-1234567890", 1700000000, "{\"a\":1}", 7, hex), 0);
	EXPECT(strcmp(hex, "6f3e1965c2ce8dadc70bc125790d73cfe7dc6bce5c0493d00d3a1d1bc508728e") == 0);
	/* base64(sha256(b"secret-for-event-signature" + b'{"a":1}')) without its padding */
	EXPECT_EQ(wh_sign_e2b("secret-for-event-signature", "{\"a\":1}", 7, b64), 0);
	EXPECT(strcmp(b64, "Oi7CGlvgcBk9KRmtByl46B0j5vLgPeXIwDScrkndEB8") == 0);
}

static void test_backoff(void)
{
	EXPECT_EQ(wh_backoff_ms(1), 1000);
	EXPECT_EQ(wh_backoff_ms(2), 2000);
	EXPECT_EQ(wh_backoff_ms(3), 4000);
	EXPECT_EQ(wh_backoff_ms(6), 32000);
	EXPECT_EQ(wh_backoff_ms(7), 60000);
	EXPECT_EQ(wh_backoff_ms(1000), 60000);
}

int main(void)
{
	RUN(test_type_names);
	RUN(test_types_json);
	RUN(test_transitions);
	RUN(test_json_round_trip);
	RUN(test_url);
	RUN(test_addresses);
	RUN(test_signatures);
	RUN(test_backoff);
	return DONE();
}
