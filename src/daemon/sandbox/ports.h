/* ports.h -- a sandbox's TCP ports as the world reaches them (docs/design/ports.md): which are
 * public, the tokens that open one, and whether a request may pass. The rules live here, once;
 * the port proxy (src/daemon/ports/), /v1's ports routes and the E2B layer parse and render.
 *
 * Private by default: a port opens to a token of its own (scope "port:N", issued by the control
 * plane, kept hashed in the store like every data-plane token), or to the sandbox's E2B traffic
 * token (its envd token), or to anyone once it is public. Public marks are rows of the same
 * token table (scope "public:N", "public:*" for every port, never expiring), so they survive a
 * restart and go with the sandbox; each process keeps the marks of the sandboxes it holds in
 * memory once read. */
#ifndef SPACE_SANDBOX_PORTS_H
#define SPACE_SANDBOX_PORTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "model/model.h"
#include "sandbox.h"

struct spaced;
struct store;

#define PORT_TOKEN_ID_LEN 16  /* a token's id: the first hex digits of its SHA-256 */
#define PORT_PUBLIC_MAX 64    /* public ports of one sandbox (every port: one mark) */

/* "8000" -> 8000: decimal digits only, 1..65535 (pure). -1 otherwise. */
int port_parse(const char *s, size_t n);

/* What a request offers. */
struct port_cred {
	const char *token;   /* X-Space-Token, the cookie, or ?space_token= (NULL: none) */
	const char *traffic; /* E2B's e2b-traffic-access-token (NULL: none) */
};

/* A check the loop could not answer from memory: what the store's thread reads. */
struct port_check {
	char sb_id[ID_LEN];
	uint16_t port;
	uint64_t gen;          /* the sandbox's marks as they were when it began */
	bool need_marks;       /* read its public marks */
	uint16_t marks[PORT_PUBLIC_MAX];
	size_t nmarks;
	bool all;
	int marks_rc;
	bool need_row;         /* read the token's row */
	char scope[16];
	struct token_row row;
	space_err cred_err;    /* why the credential alone did not open it (code 0: none given) */
};

/* May a request with cred reach sb_id's port? 0 yes; -1 no (err: ENOENT no such sandbox,
 * EACCES why not); 1: run port_check_read(conn, pc) on the store's thread, then
 * port_check_verdict on the loop. */
int port_check_begin(struct spaced *d, const char *sb_id, uint16_t port, const struct port_cred *cred,
		     struct port_check *pc, space_err *err);
void port_check_read(struct store *conn, void *arg);
int port_check_verdict(struct spaced *d, struct port_check *pc, space_err *err);

/* Does the credential that let a connection in still open the port? Asked at each request a
 * kept-alive connection carries after its first, from memory alone: a token this process
 * checked stays there until it expires or is revoked, a public mark until it is taken back. */
bool port_still_open(struct spaced *d, const char *sb_id, uint16_t port, const struct port_cred *cred);

/* May a connection to its guest be opened now? 0 yes (it runs); 1 not yet: it is on its way
 * (a paused or suspended one is woken by this call, as traffic wakes it); -1: ENOENT, or
 * EAGAIN naming the state it stays in (stopped, failed...). */
int port_ready(struct spaced *d, const char *sb_id, space_err *err);

/* A token that opens sb_id's port (ttl_s <= 0: the configured data-plane TTL; at most
 * SPEC_TOKEN_TTL_MAX); id: its id, for revoking it alone. */
int port_token_issue(struct spaced *d, const char *sb_id, uint16_t port, int ttl_s, char token[65],
		     char id[PORT_TOKEN_ID_LEN + 1], int64_t *expires_ms, space_err *err);

/* Marks port public (port 0: every port) or private again, from now on (its row is written
 * behind: a reply through api_reply_stored leaves once it is in). */
int port_set_public(struct spaced *d, const char *sb_id, uint16_t port, bool public, space_err *err);

/* Revoking tokens: from memory now (port_revoke_begin: how many), from the store on its thread
 * (port_revoke_read: job from port_revoke_job), whose count says whether id named any. */
struct port_revoke {
	char sb_id[ID_LEN];
	char scope[16];
	char id[PORT_TOKEN_ID_LEN + 1]; /* "" = every token of the port */
	int deleted;
	int rc;
	space_err err;
};
int port_revoke_begin(struct spaced *d, const char *sb_id, uint16_t port, const char *id, struct port_revoke *pr,
		      space_err *err);
void port_revoke_read(struct store *conn, void *arg);

/* What the store says of sb_id's ports (on its thread): public marks and live tokens per port,
 * as {"public_all": bool, "ports": {"8000": {"public": bool, "tokens": N}}}. */
struct port_exposed {
	char sb_id[ID_LEN];
	json_t *out;
	int rc;
	space_err err;
};
void port_exposed_read(struct store *conn, void *arg);

/* What listens in the guest, from its /proc/net/tcp and tcp6 text (pure; hostile input:
 * malformed lines are skipped). Appends {"port", "address", "reachable"} objects to out, one
 * per listening port (the first address seen); reachable: bound to every address or the
 * guest's own, not loopback alone. */
void port_listening_parse(const char *text, size_t len, json_t *out);

/* A connection to one of its ports opened (+1) or ended (-1): while any is open the sandbox is
 * in use (suspend_idle does not count); each one is activity. */
void port_traffic(struct spaced *d, const char *sb_id, int delta);

/* The sandbox is gone from memory: its marks go with it. */
void ports_free(struct sandbox *sb);

#endif
