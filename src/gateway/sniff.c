/* sniff.c -- the request-line test (sniff.h). Generous on purpose: whatever an HTTP server
 * might read as a request must go through the HTTP relay, where every Host is checked. A test
 * stricter than the servers' (upper-case methods only, say) would let "\r\nget / HTTP/1.1"
 * through as opaque bytes, and a server that skips the empty line and takes any token as a
 * method would then serve whatever Host followed: fronting past the check. */
#include "sniff.h"

#include <stdbool.h>
#include <string.h>

/* RFC 9110 5.6.2 token characters. */
static bool tchar(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

int gw_sniff_http(const uint8_t *b, size_t n)
{
	size_t i = 0, start;

	/* RFC 9112 2.2: servers ignore at least one empty line before the request line */
	while (i < n && (b[i] == '\r' || b[i] == '\n'))
		i++;
	for (start = i; i < n; i++) {
		if (b[i] == ' ')
			return i > start ? 1 : -1;
		if (!tchar(b[i]) || i - start >= GW_SNIFF_METHOD_MAX)
			return -1;
	}
	return 0;
}
