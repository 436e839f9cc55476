/* port_names.c -- the names clients reach a sandbox's port by (port_names.h) */
#include "port_names.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The data plane URL's scheme (length), and its ":port" (NULL: none), after the last ':' that
 * is not inside an [IPv6] literal. */
static const char *url_port(const char *data_url, size_t *scheme, size_t *plen)
{
	const char *rest = strstr(data_url, "://"), *host = rest ? rest + 3 : data_url, *colon = NULL;
	size_t hl = strcspn(host, "/");

	*scheme = rest ? (size_t)(rest - data_url) : 0;
	for (size_t i = 0; i < hl; i++)
		if (host[i] == ':')
			colon = host + i;
		else if (host[i] == ']')
			colon = NULL;
	*plen = colon ? (size_t)(host + hl - colon) : 0;
	return colon;
}

void port_url(const char *data_url, const char *domain, uint16_t port, const char *id, char *out, size_t len)
{
	size_t sl, pl;
	const char *colon = url_port(data_url, &sl, &pl);
	char p[8];

	if (port)
		snprintf(p, sizeof(p), "%u", (unsigned)port);
	else
		snprintf(p, sizeof(p), "{port}");
	snprintf(out, len, "%.*s://%s-%s.%s%.*s/", sl ? (int)sl : 4, sl ? data_url : "http", p, id, domain, (int)pl,
		 colon ? colon : "");
}

void port_tunnel_url(const char *data_url, const char *id, uint16_t port, char *out, size_t len)
{
	bool tls = strncmp(data_url, "https://", 8) == 0;
	const char *rest = strstr(data_url, "://");
	size_t n;

	rest = rest ? rest + 3 : data_url;
	n = strlen(rest);
	while (n && rest[n - 1] == '/')
		n--;
	snprintf(out, len, "%s://%.*s/v1/sandboxes/%s/ports/%u/tunnel", tls ? "wss" : "ws", (int)n, rest, id,
		 (unsigned)port);
}

void port_domain(const char *data_url, const char *domain, char *out, size_t len)
{
	size_t sl, pl;
	const char *colon = url_port(data_url, &sl, &pl);

	snprintf(out, len, "%s%.*s", domain, (int)pl, colon ? colon : "");
}
