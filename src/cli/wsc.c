/* wsc.c -- a WebSocket client over a libcurl connect-only handle (wsc.h) */
#include "wsc.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#define WSC_MAX_MESSAGE (16u << 20)
#define WSC_HEAD_MAX (16u << 10)
#define WSC_IO_TIMEOUT_MS 30000

struct wsc {
	CURL *curl;
	curl_socket_t fd;
	uint8_t *buf;   /* received, not yet parsed */
	size_t len, cap;
	uint8_t *msg;   /* the message handed out last (and fragments being joined) */
	size_t msg_len, msg_cap;
	size_t consumed; /* bytes of buf to drop at the next call */
	bool closed;
};

size_t wsc_frame_header(uint8_t out[14], uint8_t opcode, uint64_t len, const uint8_t mask[4])
{
	size_t n = 2;

	out[0] = (uint8_t)(0x80 | opcode);
	if (len < 126) {
		out[1] = (uint8_t)(0x80 | len);
	} else if (len < 65536) {
		out[1] = 0x80 | 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		n = 4;
	} else {
		out[1] = 0x80 | 127;
		for (int i = 0; i < 8; i++)
			out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
		n = 10;
	}
	memcpy(out + n, mask, 4);
	return n + 4;
}

int wsc_frame_parse(const uint8_t *buf, size_t n, size_t max, bool *fin, uint8_t *opcode, size_t *hlen,
		    uint64_t *plen)
{
	uint64_t len;
	size_t h = 2;

	if (n < 2)
		return 0;
	if (buf[1] & 0x80 || buf[0] & 0x70)
		return -1; /* a server never masks; no extensions were agreed */
	*fin = buf[0] & 0x80;
	*opcode = buf[0] & 0x0f;
	len = buf[1] & 0x7f;
	if (len == 126) {
		if (n < 4)
			return 0;
		len = (uint64_t)buf[2] << 8 | buf[3];
		h = 4;
	} else if (len == 127) {
		if (n < 10)
			return 0;
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | buf[2 + i];
		h = 10;
	}
	if ((*opcode & 0x8) && (len > 125 || !*fin))
		return -1;
	if (len > max)
		return -1;
	*hlen = h;
	*plen = len;
	return n - h >= len ? 1 : 0;
}

/* Waits (at most WSC_IO_TIMEOUT_MS) until the socket is ready for `events`. */
static int wait_fd(curl_socket_t fd, short events, space_err *e)
{
	struct pollfd p = { .fd = fd, .events = events };
	int r = poll(&p, 1, WSC_IO_TIMEOUT_MS);

	if (r < 0)
		return err_sys(e, errno, "poll");
	if (r == 0)
		return err_set(e, ETIMEDOUT, "the data plane did not answer within %d s", WSC_IO_TIMEOUT_MS / 1000);
	return 0;
}

static int send_all(struct wsc *w, const void *data, size_t len, space_err *e)
{
	const char *p = data;

	while (len) {
		size_t sent = 0;
		CURLcode rc = curl_easy_send(w->curl, p, len, &sent);

		if (rc == CURLE_AGAIN) {
			if (wait_fd(w->fd, POLLOUT, e) < 0)
				return -1;
			continue;
		}
		if (rc != CURLE_OK)
			return err_set(e, EIO, "sending to the data plane: %s", curl_easy_strerror(rc));
		p += sent;
		len -= sent;
	}
	return 0;
}

/* Reads what the connection has now into buf: 1 read something, 0 nothing (yet), -1 closed or
 * failed. */
static int fill(struct wsc *w, space_err *e)
{
	bool any = false;

	for (;;) {
		size_t got = 0;
		CURLcode rc;

		if (w->cap - w->len < 65536) {
			size_t cap = w->cap ? w->cap * 2 : 131072;
			uint8_t *b = realloc(w->buf, cap);

			if (!b)
				return err_set(e, ENOMEM, "out of memory");
			w->buf = b;
			w->cap = cap;
		}
		rc = curl_easy_recv(w->curl, w->buf + w->len, w->cap - w->len, &got);
		if (rc == CURLE_AGAIN)
			return any;
		if (rc != CURLE_OK)
			return err_set(e, EIO, "reading from the data plane: %s", curl_easy_strerror(rc));
		if (got == 0)
			return any ? 1 : err_set(e, ECONNRESET, "the data plane closed the connection");
		w->len += got;
		any = true;
	}
}

static char *http_url(const char *url)
{
	const char *rest;
	char *out = NULL;

	if (strncmp(url, "ws://", 5) == 0)
		rest = url + 5;
	else if (strncmp(url, "wss://", 6) == 0)
		rest = url + 6;
	else
		return NULL;
	if (asprintf(&out, "%s://%s", url[2] == 's' ? "https" : "http", rest) < 0)
		return NULL;
	return out;
}

static void b64(const uint8_t *in, size_t n, char *out)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);

		out[o++] = t[v >> 18 & 63];
		out[o++] = t[v >> 12 & 63];
		out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? t[v & 63] : '=';
	}
	out[o] = '\0';
}

/* The reply's head: 101, or the error the data plane answered with (its JSON message). */
static int handshake(struct wsc *w, const char *path, const char *host, const char *token, space_err *e)
{
	uint8_t key[16];
	char k64[32], *req = NULL, *end;
	int n;

	if (getrandom(key, sizeof(key), 0) != sizeof(key))
		return err_sys(e, errno, "getrandom");
	b64(key, sizeof(key), k64);
	n = asprintf(&req,
		     "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		     "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n",
		     path, host, k64, token);
	if (n < 0)
		return err_set(e, ENOMEM, "out of memory");
	n = send_all(w, req, (size_t)n, e);
	explicit_bzero(req, strlen(req));
	free(req);
	if (n < 0)
		return -1;
	for (;;) {
		int r;

		if (w->len && (end = memmem(w->buf, w->len, "\r\n\r\n", 4)))
			break;
		if (w->len > WSC_HEAD_MAX)
			return err_set(e, EPROTO, "the data plane's reply head is too long");
		if ((r = fill(w, e)) < 0)
			return -1;
		if (r == 0 && wait_fd(w->fd, POLLIN, e) < 0)
			return -1;
	}
	size_t head = (size_t)(end - (char *)w->buf) + 4;

	if (w->len < 12 || memcmp(w->buf, "HTTP/1.1 101", 12) != 0) {
		const char *msg = memmem(w->buf, w->len, "\"message\":\"", 11);
		int status = w->len >= 12 ? atoi((char *)w->buf + 9) : 0;

		if (msg) {
			const char *m = msg + 11, *q = memchr(m, '"', w->len - (size_t)(m - (char *)w->buf));
			return err_set(e, status == 401 ? EACCES : status == 404 ? ENOENT : EIO, "%d: %.*s", status,
				       q ? (int)(q - m) : 0, m);
		}
		return err_set(e, EIO, "the data plane answered %d, not a WebSocket", status);
	}
	memmove(w->buf, w->buf + head, w->len - head);
	w->len -= head;
	return 0;
}

struct wsc *wsc_open(const char *url, const char *token, space_err *e)
{
	struct wsc *w = calloc(1, sizeof(*w));
	char *hurl = http_url(url);
	const char *hp = strstr(url, "://"), *path;
	char host[256];
	curl_socket_t fd = CURL_SOCKET_BAD;
	CURLcode rc;

	if (!w || !hurl) {
		free(w);
		free(hurl);
		err_set(e, EINVAL, "not a ws:// or wss:// URL: %.200s", url);
		return NULL;
	}
	hp += 3;
	path = strchr(hp, '/');
	snprintf(host, sizeof(host), "%.*s", path ? (int)(path - hp) : (int)strlen(hp), hp);
	w->curl = curl_easy_init();
	if (!w->curl) {
		err_set(e, ENOMEM, "curl_easy_init");
		goto fail;
	}
	curl_easy_setopt(w->curl, CURLOPT_URL, hurl);
	curl_easy_setopt(w->curl, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(w->curl, CURLOPT_CONNECTTIMEOUT, 30L);
	if ((rc = curl_easy_perform(w->curl)) != CURLE_OK) {
		err_set(e, ECONNREFUSED, "connecting to %s: %s", host, curl_easy_strerror(rc));
		goto fail;
	}
	if (curl_easy_getinfo(w->curl, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK || fd == CURL_SOCKET_BAD) {
		err_set(e, EIO, "no socket from libcurl");
		goto fail;
	}
	w->fd = fd;
	if (handshake(w, path ? path : "/", host, token, e) < 0)
		goto fail;
	free(hurl);
	return w;
fail:
	free(hurl);
	wsc_free(w);
	return NULL;
}

void wsc_free(struct wsc *w)
{
	if (!w)
		return;
	if (w->curl)
		curl_easy_cleanup(w->curl);
	free(w->buf);
	free(w->msg);
	free(w);
}

int wsc_fd(const struct wsc *w)
{
	return (int)w->fd;
}

static int send_frame(struct wsc *w, uint8_t opcode, const void *data, size_t len, space_err *e)
{
	uint8_t hdr[14], mask[4], chunk[16384];
	size_t h;

	if (getrandom(mask, sizeof(mask), 0) != sizeof(mask))
		return err_sys(e, errno, "getrandom");
	h = wsc_frame_header(hdr, opcode, len, mask);
	if (send_all(w, hdr, h, e) < 0)
		return -1;
	for (size_t off = 0; off < len;) {
		size_t n = len - off < sizeof(chunk) ? len - off : sizeof(chunk);

		for (size_t i = 0; i < n; i++)
			chunk[i] = ((const uint8_t *)data)[off + i] ^ mask[(off + i) & 3];
		if (send_all(w, chunk, n, e) < 0)
			return -1;
		off += n;
	}
	return 0;
}

int wsc_send(struct wsc *w, const void *data, size_t len, space_err *e)
{
	return send_frame(w, 0x2, data, len, e);
}

void wsc_close(struct wsc *w)
{
	uint8_t code[2] = { 1000 >> 8, 1000 & 0xff };
	space_err e = { 0 };

	if (!w->closed)
		send_frame(w, 0x8, code, sizeof(code), &e);
	w->closed = true;
}

int wsc_recv(struct wsc *w, const uint8_t **data, size_t *len, space_err *e)
{
	bool fin;
	uint8_t op;
	size_t hlen;
	uint64_t plen;
	int r;

	if (w->consumed) {
		memmove(w->buf, w->buf + w->consumed, w->len - w->consumed);
		w->len -= w->consumed;
		w->consumed = 0;
	}
	for (;;) {
		r = wsc_frame_parse(w->buf, w->len, WSC_MAX_MESSAGE, &fin, &op, &hlen, &plen);
		if (r < 0)
			return err_set(e, EPROTO, "a malformed frame from the data plane");
		if (r == 0) {
			int f = fill(w, e);

			if (f < 0)
				return -1;
			if (f == 0)
				return 0;
			continue;
		}
		const uint8_t *p = w->buf + hlen;

		w->consumed = hlen + (size_t)plen;
		if (op == 0x9) { /* ping: pong with its payload */
			if (send_frame(w, 0xA, p, (size_t)plen, e) < 0)
				return -1;
		} else if (op == 0x8) {
			int code = plen >= 2 ? p[0] << 8 | p[1] : 1005;

			w->closed = true;
			err_set(e, EIO, "closed (%d): %.*s", code, plen > 2 ? (int)plen - 2 : 0, p + 2);
			return code == 1000 || code == 1005 ? -2 : -1;
		} else if (op == 0x1 || op == 0x2 || op == 0x0) {
			if (w->msg_len + plen > WSC_MAX_MESSAGE)
				return err_set(e, EPROTO, "a message over %u bytes", WSC_MAX_MESSAGE);
			if (w->msg_len + plen > w->msg_cap) {
				size_t cap = (size_t)(w->msg_len + plen);
				uint8_t *m = realloc(w->msg, cap ? cap : 1);

				if (!m)
					return err_set(e, ENOMEM, "out of memory");
				w->msg = m;
				w->msg_cap = cap;
			}
			memcpy(w->msg + w->msg_len, p, (size_t)plen);
			w->msg_len += (size_t)plen;
			if (fin) {
				*data = w->msg;
				*len = w->msg_len;
				w->msg_len = 0;
				return 1;
			}
		}
		memmove(w->buf, w->buf + w->consumed, w->len - w->consumed);
		w->len -= w->consumed;
		w->consumed = 0;
	}
}
