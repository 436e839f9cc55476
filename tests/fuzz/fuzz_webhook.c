/* fuzz_webhook.c -- libFuzzer target: what a client hands the events component. A webhook's
 * URL through wh_url_parse (src/daemon/events/webhook_url.c), an address through
 * wh_addr_class, a types filter through ev_types_csv, and a stored event's JSON through
 * event_from_json and back (src/daemon/events/event_types.c).
 *
 * Besides the sanitizers, the contracts are checked: a URL that parses has a host of DNS
 * characters or an IP address, a port 1..65535 and a path beginning with '/', and no user info;
 * an address's class is one of the three; a filter that parses is a mask of known types; an
 * event read back renders and reads again as the same type, cursor and sandbox.
 * Byte 0: the mode (% 4); the rest: the input. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events/events.h"
#include "events/webhook.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MUST(c) do { if (!(c)) { fprintf(stderr, "fuzz_webhook: %s:%d: %s\n", __FILE__, __LINE__, #c); abort(); } } while (0)

static void url(const char *s)
{
	struct wh_url u;
	space_err err = { 0 };

	if (wh_url_parse(s, &u, &err) < 0) {
		MUST(err.msg[0]);
		return;
	}
	MUST(u.host[0] && u.port >= 1 && u.port <= 65535 && u.path[0] == '/');
	MUST(!strchr(u.host, '@') && !strchr(u.host, '/') && !strchr(u.path, '#'));
	for (const char *p = u.path; *p; p++)
		MUST((unsigned char)*p > ' ' && *p != 0x7f);
}

static void addr(const uint8_t *d, size_t n)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	const char *why = NULL;
	int c;

	if (n >= 16) {
		memcpy(&s6.sin6_addr, d, 16);
		c = wh_addr_class((struct sockaddr *)&s6, &why);
	} else if (n >= 4) {
		memcpy(&s4.sin_addr, d, 4);
		c = wh_addr_class((struct sockaddr *)&s4, &why);
	} else {
		return;
	}
	MUST(c == WH_ADDR_PUBLIC || c == WH_ADDR_LOOPBACK || c == WH_ADDR_REFUSED);
	MUST(why && why[0]);
}

static void types(const char *s)
{
	unsigned mask = 0;
	space_err err = { 0 };

	if (ev_types_csv(s, &mask, &err) == 0)
		MUST(mask && !(mask & ~EVT_ALL));
	else
		MUST(err.msg[0]);
}

static void event(const char *s, size_t n)
{
	json_t *j = json_loadb(s, n, 0, NULL), *again;
	struct sb_event e, back;
	space_err err = { 0 };

	if (!j)
		return;
	if (event_from_json(j, &e, &err) == 0) {
		MUST((unsigned)e.type < EVT__COUNT);
		again = event_json(&e);
		MUST(again);
		MUST(event_from_json(again, &back, &err) == 0);
		MUST(back.type == e.type && back.seq == e.seq && strcmp(back.sandbox_id, e.sandbox_id) == 0);
		event_clear(&back);
		json_decref(again);
		event_clear(&e);
	}
	json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (size < 1 || size > 8192)
		return 0;
	if (!(s = malloc(size)))
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	switch (data[0] % 4) {
	case 0: url(s); break;
	case 1: addr(data + 1, size - 1); break;
	case 2: types(s); break;
	default: event(s, size - 1); break;
	}
	free(s);
	return 0;
}
