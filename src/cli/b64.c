/* b64.c -- base64 decoding of event-stream payloads */
#include "b64.h"

#include <stdbool.h>

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

ssize_t ctl_b64_decode(const char *in, size_t n, unsigned char *out)
{
	unsigned int acc = 0;
	size_t o = 0, i;
	int bits = 0, quad = 0;
	bool pad = false;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		int v;

		if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
			continue;
		if (c == '=') {
			/* Padding only completes a quad that has 2 or 3 chars. */
			if (quad < 2)
				return -1;
			pad = true;
			if (++quad == 4) {
				quad = 0;
			}
			continue;
		}
		if (pad)
			return -1; /* data after padding */
		v = b64_value(c);
		if (v < 0)
			return -1;
		acc = (acc << 6) | (unsigned int)v;
		bits += 6;
		quad = (quad + 1) % 4;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	if (quad == 1)
		return -1; /* 6 bits cannot make a byte */
	return (ssize_t)o;
}
