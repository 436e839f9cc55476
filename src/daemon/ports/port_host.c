/* port_host.c -- the names that address a sandbox's port, {port}-{id}.{domain}, and the cookie
 * that carries a browser's port token (ports_front.h) */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "daemon.h"
#include "ports_front.h"
#include "sandbox/ports.h"

/* host less its ":port" (an IPv6 literal is never a port name). */
static size_t name_len(const char *host, size_t n)
{
	const char *colon = memrchr(host, ':', n);

	return colon ? (size_t)(colon - host) : n;
}

bool port_host_is(const char *host, size_t n, const char *domain)
{
	size_t dl = strlen(domain), hn = name_len(host, n), label;

	if (!dl || hn < dl + 2 || host[hn - dl - 1] != '.' || strncasecmp(host + hn - dl, domain, dl) != 0)
		return false;
	label = hn - dl - 1;
	return !memchr(host, '.', label) && memchr(host, '-', label) != NULL;
}

int port_host_parse(const char *host, size_t n, const char *domain, uint16_t *port, char id[ID_LEN],
		    space_err *err)
{
	size_t label = name_len(host, n) - strlen(domain) - 1;
	const char *dash = memchr(host, '-', label);
	size_t pl = (size_t)(dash - host), il = label - pl - 1;
	int p = port_parse(host, pl);

	if (p < 0)
		return err_set(err, EINVAL, "'%.*s' is not a port: a port is 1..65535 ({port}-{sandbox id}.%s)",
			       (int)(pl < 16 ? pl : 16), host, domain);
	if (il >= ID_LEN)
		return err_set(err, ENOENT, "no sandbox '%.40s...'", dash + 1);
	for (size_t i = 0; i < il; i++)
		id[i] = (char)tolower((unsigned char)dash[1 + i]);
	id[il] = '\0';
	if (!id_valid(id, "sb-"))
		return err_set(err, ENOENT, "no sandbox '%s'", id);
	*port = (uint16_t)p;
	return 0;
}

bool port_host_takes(const struct http_plane *plane, const char *host, size_t n)
{
	return plane->d && plane->d->cfg.ports_domain[0] && port_host_is(host, n, plane->d->cfg.ports_domain);
}

bool port_cookie_get(const char *cookie, const char *name, char *out, size_t len)
{
	size_t nl = strlen(name);

	while (cookie && *cookie) {
		const char *end = strchr(cookie, ';');
		size_t n = end ? (size_t)(end - cookie) : strlen(cookie);

		while (n && (*cookie == ' ' || *cookie == '\t'))
			cookie++, n--;
		if (n > nl && strncmp(cookie, name, nl) == 0 && cookie[nl] == '=') {
			size_t vl = n - nl - 1;

			while (vl && (cookie[nl + vl] == ' ' || cookie[nl + vl] == '\t'))
				vl--;
			if (vl >= len)
				return false;
			memcpy(out, cookie + nl + 1, vl);
			out[vl] = '\0';
			return true;
		}
		cookie = end ? end + 1 : NULL;
	}
	return false;
}
