/* webhook_url.c -- a webhook's URL read strictly, and which addresses a delivery may go to:
 * pure, unit-tested (tests/unit/test_events.c). A webhook is a request the daemon makes on a
 * client's word, so nothing inside the host's own networks is reached unless the operator
 * says so (--webhooks-allow-loopback: loopback only). */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "webhook.h"

static int host_ok(const char *h, size_t n)
{
	if (n == 0 || n > 253)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)h[i]) && h[i] != '-' && h[i] != '.')
			return 0;
	return 1;
}

int wh_url_parse(const char *url, struct wh_url *out, space_err *err)
{
	const char *p, *auth, *end;
	size_t n;

	memset(out, 0, sizeof(*out));
	if (!url || (n = strlen(url)) == 0 || n >= WH_URL_MAX)
		return err_set(err, EINVAL, "url: an http:// or https:// URL of at most %d bytes", WH_URL_MAX - 1);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)url[i] <= ' ' || url[i] == 0x7f)
			return err_set(err, EINVAL, "url: no spaces or control characters");
	if (strncasecmp(url, "https://", 8) == 0) {
		out->tls = true;
		auth = url + 8;
	} else if (strncasecmp(url, "http://", 7) == 0) {
		auth = url + 7;
	} else {
		return err_set(err, EINVAL, "url: must begin with http:// or https://");
	}
	end = auth + strcspn(auth, "/?#");
	if (memchr(auth, '@', (size_t)(end - auth)))
		return err_set(err, EINVAL, "url: no user or password in the URL (sign with the secret instead)");
	if (strchr(url, '#'))
		return err_set(err, EINVAL, "url: no #fragment");
	out->port = out->tls ? 443 : 80;
	p = auth;
	if (*p == '[') {
		const char *close = memchr(p, ']', (size_t)(end - p));

		if (!close || (size_t)(close - p - 1) >= sizeof(out->host) || close == p + 1)
			return err_set(err, EINVAL, "url: a bracketed IPv6 address must close with ]");
		memcpy(out->host, p + 1, (size_t)(close - p - 1));
		p = close + 1;
		struct in6_addr a6;
		if (inet_pton(AF_INET6, out->host, &a6) != 1)
			return err_set(err, EINVAL, "url: '%s' is not an IPv6 address", out->host);
		out->host_is_ip = true;
	} else {
		const char *colon = memchr(p, ':', (size_t)(end - p));
		const char *hend = colon ? colon : end;

		if (!host_ok(p, (size_t)(hend - p)))
			return err_set(err, EINVAL, "url: the host must be a DNS name or an IP address");
		memcpy(out->host, p, (size_t)(hend - p));
		for (char *c = out->host; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		p = hend;
		struct in_addr a4;
		out->host_is_ip = inet_pton(AF_INET, out->host, &a4) == 1;
	}
	if (*p == ':') {
		char *e = NULL;
		long port;

		if (!isdigit((unsigned char)p[1]))
			return err_set(err, EINVAL, "url: a port is 1 to 65535");
		port = strtol(p + 1, &e, 10);
		if (e != end || port < 1 || port > 65535)
			return err_set(err, EINVAL, "url: a port is 1 to 65535");
		out->port = (int)port;
	} else if (p != end) {
		return err_set(err, EINVAL, "url: unexpected '%c' after the host", *p);
	}
	snprintf(out->path, sizeof(out->path), "%s%s", *end == '/' ? "" : "/", end);
	return 0;
}

/* v4 in host order against a prefix (net in host order). */
static bool in4(uint32_t a, uint32_t net, int bits)
{
	uint32_t mask = bits ? ~0u << (32 - bits) : 0;

	return (a & mask) == (net & mask);
}

#define V4(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

static int class4(uint32_t a, const char **why)
{
	static const struct {
		uint32_t net;
		int bits;
		const char *why;
	} refused[] = {
		{ V4(0, 0, 0, 0), 8, "'this network' (0.0.0.0/8)" },
		{ V4(10, 0, 0, 0), 8, "a private range (10.0.0.0/8)" },
		{ V4(100, 64, 0, 0), 10, "carrier-grade NAT (100.64.0.0/10)" },
		{ V4(169, 254, 0, 0), 16, "link-local (169.254.0.0/16)" },
		{ V4(172, 16, 0, 0), 12, "a private range (172.16.0.0/12)" },
		{ V4(192, 0, 0, 0), 24, "IETF protocol assignments (192.0.0.0/24)" },
		{ V4(192, 0, 2, 0), 24, "documentation (TEST-NET-1)" },
		{ V4(192, 168, 0, 0), 16, "a private range (192.168.0.0/16)" },
		{ V4(198, 18, 0, 0), 15, "benchmarking (198.18.0.0/15)" },
		{ V4(198, 51, 100, 0), 24, "documentation (TEST-NET-2)" },
		{ V4(203, 0, 113, 0), 24, "documentation (TEST-NET-3)" },
		{ V4(224, 0, 0, 0), 4, "multicast (224.0.0.0/4)" },
		{ V4(240, 0, 0, 0), 4, "reserved (240.0.0.0/4)" },
	};

	if (in4(a, V4(127, 0, 0, 0), 8)) {
		*why = "loopback (127.0.0.0/8)";
		return WH_ADDR_LOOPBACK;
	}
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (in4(a, refused[i].net, refused[i].bits)) {
			*why = refused[i].why;
			return WH_ADDR_REFUSED;
		}
	*why = "public";
	return WH_ADDR_PUBLIC;
}

int wh_addr_class(const struct sockaddr *sa, const char **why)
{
	static const unsigned char v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	const char *dummy;

	if (!why)
		why = &dummy;
	if (sa->sa_family == AF_INET)
		return class4(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr), why);
	if (sa->sa_family == AF_INET6) {
		const unsigned char *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		static const unsigned char zero[16], one[16] = { [15] = 1 };

		if (memcmp(b, v4mapped, 12) == 0 || (memcmp(b, zero, 12) == 0 && memcmp(b, zero, 16) != 0 &&
						    memcmp(b, one, 16) != 0)) {
			uint32_t a = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];

			return class4(a, why);
		}
		if (memcmp(b, one, 16) == 0) {
			*why = "loopback (::1)";
			return WH_ADDR_LOOPBACK;
		}
		if (memcmp(b, zero, 16) == 0) {
			*why = "unspecified (::)";
			return WH_ADDR_REFUSED;
		}
		if ((b[0] & 0xfe) == 0xfc) {
			*why = "unique local (fc00::/7)";
			return WH_ADDR_REFUSED;
		}
		if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) {
			*why = "link-local (fe80::/10)";
			return WH_ADDR_REFUSED;
		}
		if (b[0] == 0xff) {
			*why = "multicast (ff00::/8)";
			return WH_ADDR_REFUSED;
		}
		if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) {
			*why = "documentation (2001:db8::/32)";
			return WH_ADDR_REFUSED;
		}
		if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b) {
			*why = "NAT64 (64:ff9b::/96)";
			return WH_ADDR_REFUSED;
		}
		*why = "public";
		return WH_ADDR_PUBLIC;
	}
	*why = "not an internet address";
	return WH_ADDR_REFUSED;
}

int wh_addr_check(const struct sockaddr *sa, bool allow_loopback, space_err *err)
{
	const char *why;
	int c = wh_addr_class(sa, &why);

	if (c == WH_ADDR_PUBLIC || (c == WH_ADDR_LOOPBACK && allow_loopback))
		return 0;
	if (c == WH_ADDR_LOOPBACK)
		return err_set(err, EACCES,
			       "url: resolves to %s, refused (a daemon run with --webhooks-allow-loopback allows it)",
			       why);
	return err_set(err, EACCES, "url: resolves to %s, refused: webhooks go to public addresses only", why);
}
