/* client.h -- spacectl's HTTP helpers over libcurl: control-plane JSON
 * calls, data-plane requests, API error bodies turned into messages */
#ifndef SPACE_CLI_CLIENT_H
#define SPACE_CLI_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#define CTL_DEFAULT_URL "http://127.0.0.1:7070"

/* Exit statuses. */
#define CTL_EXIT_OK 0
#define CTL_EXIT_FAIL 1  /* API, network or local failure */
#define CTL_EXIT_USAGE 2 /* bad command line */
#define CTL_EXIT_EXEC 125 /* exec could not run or follow the command */

/* What every verb gets from main(): the global options. */
struct ctl {
	const char *prog; /* "spacectl" */
	const char *verb;
	const char *url;     /* control plane base URL, no trailing '/' */
	const char *api_key; /* NULL when neither flag nor environment set it */
	bool json;           /* print raw JSON instead of tables */
};

/* A body sink: return n to go on, anything else aborts the transfer. */
typedef size_t (*http_sink_fn)(const char *p, size_t n, void *arg);
/* An upload source: fill at most n bytes of buf; return how many, 0 at the
 * end of the body, or HTTP_SOURCE_ABORT to abort the transfer (the source
 * keeps its own error). */
typedef size_t (*http_source_fn)(char *buf, size_t n, void *arg);
#define HTTP_SOURCE_ABORT ((size_t)0x10000000) /* CURL_READFUNC_ABORT */

/* A libcurl handle kept across requests, so that they reuse its connection
 * (keep-alive): for many small requests in a row (keystrokes).  One thread
 * at a time. */
struct http_conn;
struct http_conn *http_conn_new(void);
void http_conn_free(struct http_conn *conn);

struct http_req {
	const char *method;
	const char *url;    /* absolute */
	const char *bearer; /* Authorization: Bearer <bearer>, if set */
	const char *content_type;
	const char *accept;
	const char *last_event_id; /* Last-Event-ID header, if set */
	const void *body;
	size_t body_len;
	long timeout_s; /* whole request; 0 = no limit */
	long idle_s;    /* abort when nothing arrives for this long; 0 = never */
	/* A 2xx response body goes to sink (if set) instead of the buffer. */
	http_sink_fn sink;
	void *sink_arg;
	/* Called once the headers of a 2xx response are in. */
	void (*on_open)(void *arg);
	/* A body streamed from source instead of body/body_len: upload_size
	 * bytes, or chunked when upload_size is negative. */
	http_source_fn source;
	void *source_arg;
	long long upload_size;
	/* Run on this kept handle (see http_conn) instead of a fresh one. */
	struct http_conn *conn;
};

struct http_resp {
	long status;  /* 0 if no response arrived */
	char *body;   /* NUL-terminated; bounded (see client.c) */
	size_t len;
	bool sink_stopped; /* the sink aborted the transfer on purpose */
	int curl_code;     /* CURLcode of the transfer */
};

/* Call once, before any thread starts. */
int ctl_http_init(space_err *e);

/*
 * Run one request.  Returns -1 with e set ("POST <url>: <why>") only when no
 * complete response was obtained (connection refused, reset, timeout...);
 * any HTTP status returns 0 with resp->status set.  A transfer that the sink
 * stopped returns 0 with resp->sink_stopped.  Free resp with http_resp_free().
 */
int http_do(const struct http_req *rq, struct http_resp *resp, space_err *e);
void http_resp_free(struct http_resp *resp);

/* Turn a non-2xx response into "<message> (<code>, HTTP <status>)" (or a
 * description of an unexpected body).  Always returns -1. */
int http_error(const struct http_resp *resp, space_err *e);
/* Like http_error, but an API error is its message alone ("stat /x: No such
 * file or directory"), with e->code the errno its code stands for (ENOENT
 * for not_found, ...).  Always returns -1. */
int http_error_brief(const struct http_resp *resp, space_err *e);

/*
 * Control-plane JSON call: METHOD <c->url><path> with the API key and `body`
 * (may be NULL).  On 2xx, *out (if out is not NULL) gets the parsed JSON
 * value, or NULL for an empty body; returns 0.  Else -1 with e set.
 */
int ctl_call(const struct ctl *c, const char *method, const char *path,
	     json_t *body, json_t **out, space_err *e);
/* Like ctl_call with a GET whose 2xx body is streamed to fd. */
int ctl_get_raw(const struct ctl *c, const char *path, int fd, space_err *e);

/* Wait for an operation to finish (long-polling).  Returns 0 with *final
 * set if it succeeded; -1 with e set if it failed or polling failed. */
int ctl_wait_operation(const struct ctl *c, const char *op_id, json_t **final,
		       space_err *e);

/* "http://host:port/" -> "http://host:port" (paths are appended to it), as a copy to
 * free(); NULL when out of memory. */
char *ctl_trim_url(const char *url);
/* URL-escape one path segment or query value; free() the result. */
char *ctl_escape(const char *s);
/* "<collection>/<escaped id><suffix>" ("/v1/snapshots", "golden", ""); free()
 * the result.  NULL when out of memory. */
char *ctl_path(const char *collection, const char *id, const char *suffix);
/* ctl_path("/v1/sandboxes", id, suffix). */
char *ctl_sandbox_path(const char *id, const char *suffix);

/* Write all of buf to fd: retries EINTR and short writes, waits out
 * EAGAIN with poll().  Returns 0, or -1 with errno set. */
int ctl_write_all(int fd, const void *buf, size_t n);

/* Print JSON (indented) to stdout.  Returns the exit status. */
int ctl_print_json(const json_t *v);

/* Safe accessors for server JSON: never NULL strings. */
const char *ctl_jstr(const json_t *obj, const char *key, const char *dflt);
/* The integer at key, or dflt when missing or not a number. */
long long ctl_jint(const json_t *obj, const char *key, long long dflt);

#endif
