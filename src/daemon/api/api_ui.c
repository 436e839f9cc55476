/* api_ui.c -- GET /ui/: the browser page, static files from the ui directory (make ui) */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "cleanup.h"
#include "daemon.h"

/* The page is a few small files; anything larger is not one of ours. */
#define UI_FILE_MAX (8u << 20)
#define UI_NAME_MAX 128

static const struct {
	const char *ext;
	const char *type;
} ui_types[] = {
	{ ".html", "text/html; charset=utf-8" },
	{ ".js", "text/javascript; charset=utf-8" },
	{ ".css", "text/css; charset=utf-8" },
	{ ".map", "application/json" },
	{ ".png", "image/png" },
	{ ".svg", "image/svg+xml" },
};

/* xterm.js sets inline styles, hence 'unsafe-inline' for styles only; the
 * terminal's WebSocket goes to the data plane, another origin. */
#define UI_CSP                                                                                   \
	"default-src 'self'; connect-src 'self' ws: wss: http: https:; img-src 'self' data: blob:; " \
	"style-src 'self' 'unsafe-inline'"

bool api_ui_public(const struct http_req *r)
{
	return r->method == EVHTTP_REQ_GET && (r->nseg == 1 || r->nseg == 2) && strcmp(r->seg[0], "ui") == 0;
}

/* A plain file name of [A-Za-z0-9._-], not starting with a dot, with an
 * extension we serve: its content type, else NULL. So no path ever leaves
 * the ui directory ('/' cannot occur in a decoded segment, '..' starts with
 * a dot). */
static const char *ui_type(const char *name)
{
	size_t n = strlen(name);
	const char *dot;

	if (n == 0 || n > UI_NAME_MAX || name[0] == '.' || strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
									  "abcdefghijklmnopqrstuvwxyz"
									  "0123456789._-") != n)
		return NULL;
	dot = strrchr(name, '.');
	if (!dot)
		return NULL;
	for (size_t i = 0; i < sizeof(ui_types) / sizeof(ui_types[0]); i++)
		if (strcmp(dot, ui_types[i].ext) == 0)
			return ui_types[i].type;
	return NULL;
}

static void ui_headers(struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	evhttp_add_header(h, "Content-Security-Policy", UI_CSP);
	evhttp_add_header(h, "X-Frame-Options", "DENY");
	evhttp_add_header(h, "Referrer-Policy", "no-referrer");
}

/* Reads the whole file into buf (copied, not sendfile/mmap: `make ui` may
 * rewrite it meanwhile). 0, or -1 with errno. */
static int read_all(int fd, size_t len, struct evbuffer *buf)
{
	struct evbuffer_iovec iov;
	size_t got = 0;

	if (len == 0)
		return 0;
	if (evbuffer_reserve_space(buf, (ev_ssize_t)len, &iov, 1) != 1) {
		errno = ENOMEM;
		return -1;
	}
	while (got < len) {
		ssize_t n = read(fd, (char *)iov.iov_base + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break; /* cut meanwhile: send what there was */
		got += (size_t)n;
	}
	iov.iov_len = got;
	return evbuffer_commit_space(buf, &iov, 1);
}

void api_ui_get(struct http_req *r)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(r->req);
	const char *raw = uri ? evhttp_uri_get_path(uri) : NULL;
	const char *dir = r->d->cfg.ui_dir, *name, *type;
	_cleanup_close_ int dfd = -1, fd = -1;
	struct evbuffer *buf;
	struct stat st;

	if (r->nparam == 0) {
		/* "/ui" -> "/ui/", so that the page's relative URLs resolve under /ui/. */
		if (!raw || raw[strlen(raw) - 1] != '/') {
			ui_headers(r->req);
			evhttp_add_header(evhttp_request_get_output_headers(r->req), "Location", "/ui/");
			evhttp_send_reply(r->req, 301, "Moved Permanently", NULL);
			return;
		}
		name = "index.html";
	} else {
		name = r->param[0];
	}
	type = ui_type(name);
	if (!type) {
		http_reply_error(r->req, 404, "not_found", "no such file: /ui/%s", name);
		return;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		http_reply_error(r->req, 404, "not_found", "the browser page is not built (%s: %s): run `make ui`",
				 dir, strerror(errno));
		return;
	}
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		if (fd < 0 && errno != ENOENT && errno != ELOOP)
			http_reply_error(r->req, 500, "internal", "opening /ui/%s: %s", name, strerror(errno));
		else
			http_reply_error(r->req, 404, "not_found", "no such file: /ui/%s", name);
		return;
	}
	if ((uint64_t)st.st_size > UI_FILE_MAX) {
		http_reply_error(r->req, 500, "internal", "/ui/%s is over %u bytes", name, UI_FILE_MAX);
		return;
	}
	buf = evbuffer_new();
	if (!buf) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	if (read_all(fd, (size_t)st.st_size, buf) < 0) {
		http_reply_error(r->req, 500, "internal", "reading /ui/%s: %s", name, strerror(errno));
		evbuffer_free(buf);
		return;
	}
	ui_headers(r->req);
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Content-Type", type);
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Cache-Control", "no-cache");
	evhttp_send_reply(r->req, 200, "OK", buf);
	evbuffer_free(buf);
}
