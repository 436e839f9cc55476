/* fop.h -- the file-operation engine every front end uses (docs/design/channels.md): one
 * operation in a sandbox run as one HTTP reply (files_op.c); each front end's routes (api/files.h,
 * e2b/envd_fs.c, e2b/envd_files.c) describe how its output becomes their reply */
#ifndef SPACE_FRONT_FOP_H
#define SPACE_FRONT_FOP_H

#include <event2/buffer.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "http/http.h"
#include "model/model.h"

struct fop;

/* How one route turns the operation's output into its reply. Hooks return -1 to give up
 * (the operation is killed; an unanswered reply gets 502, a started one is cut). */
struct fop_kind {
	enum sess_kind kind;
	bool with_stdin; /* the request body is the operation's stdin */
	int ok_status;   /* a unary reply's status (0: 200) */
	/* The header line arrived (fop_header): start a streamed reply here, or not (unary). */
	int (*on_header)(struct fop *f);
	/* After the header: each further line (listings, events), or raw bytes (file contents,
	 * tar). Whatever is added to out is sent as a chunk. */
	int (*on_line)(struct fop *f, const char *line, size_t len, struct evbuffer *out);
	int (*on_raw)(struct fop *f, const uint8_t *p, size_t n, struct evbuffer *out);
	/* Success: the last bytes of a streamed reply, or a unary reply's JSON body. */
	int (*on_end)(struct fop *f, struct evbuffer *out);
	void (*free_ctx)(void *ctx);
	/* Optional hooks for other front ends (e2b/):
	 * pull_stdin: the operation's stdin comes from the route, not the request body (with_stdin
	 * set): add at most room bytes to in; return 0 (more later: fop_poke when there is), 1 (the
	 * stdin is complete: it is closed), -1 (malformed: the request is answered 400).
	 * on_error: answers an error the engine would answer itself (before a reply began): e the
	 * errno (0: none), status and code as the engine would send them, msg its message.
	 * on_done: a unary success: instead of the engine's reply, the route takes the request over
	 * (answers it, or runs a next operation on it); out holds what on_end put there. ctx is
	 * freed (free_ctx) right after it returns. */
	int (*pull_stdin)(struct fop *f, struct evbuffer *in, size_t room);
	void (*on_error)(struct fop *f, int e, int status, const char *code, const char *msg);
	void (*on_done)(struct fop *f, struct evbuffer *out);
};

/* Runs argv (NULL-terminated: the operation and its arguments) in sandbox sb_id as user (NULL:
 * the default) and answers r from its output. ctx is the route's own state (freed with
 * k->free_ctx). Answers errors itself. */
void fop_run(struct http_req *r, const char *sb_id, const struct fop_kind *k, const char *const *argv,
	     const char *user, void *ctx);
/* Starts a streamed reply (chunked, so the guest's bytes never frame it). */
void fop_reply_start(struct fop *f, int status, const char *reason);
/* Starts a reply of exactly len raw bytes (Content-Length: len). The engine counts what the
 * route's on_raw passes on against it: a byte beyond len, or an end short of it, cuts the
 * connection, so no length the guest declares can frame what a client reads next. */
void fop_reply_start_sized(struct fop *f, int status, const char *reason, uint64_t len);
/* on_header's answer when the asked-for range lies past the end: the reply is 416. */
#define FOP_RANGE_NOT_SATISFIABLE (-2)
/* A unary reply's status, when not the kind's ok_status (from on_end). */
void fop_set_status(struct fop *f, int status);
/* A flag for the route's own use (first entry of a list); returns the previous value. */
bool fop_set_first(struct fop *f, bool v);
/* A streamed document's opening, sent before anything else: prefix, j as compact JSON (null
 * when NULL), suffix. -1 when out of memory. */
int fop_open_doc(struct fop *f, const char *prefix, const json_t *j, const char *suffix);
struct evhttp_request *fop_req(struct fop *f);
json_t *fop_header(struct fop *f);
void *fop_ctx(struct fop *f);
/* The chunk being built (for on_header: bytes that go before everything else). */
struct evbuffer *fop_out(struct fop *f);
/* Wakes the engine (a pull_stdin route has more bytes; a streamed reply's route added bytes of
 * its own to fop_out, e.g. a keepalive: they are sent). */
void fop_poke(struct fop *f);

/* An operation's errno -> HTTP status and error code (pure; unit-tested). */
void files_errno_http(int e, int *status, const char **code);
/* "bytes=A-B" / "bytes=A-" -> offset and length (UINT64_MAX: to the end). 0; 1 when the header
 * is absent or a form we do not serve (a suffix or several ranges: the whole file is sent, as
 * RFC 9110 allows); -1 when malformed (pure; unit-tested). */
int files_parse_range(const char *h, uint64_t *off, uint64_t *len);

#endif
