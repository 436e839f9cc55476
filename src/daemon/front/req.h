/* req.h -- parsing /v1 request bodies into the core's typed requests (pure; unit-tested) */
#ifndef SPACE_REQ_H
#define SPACE_REQ_H

#include <jansson.h>
#include <stdbool.h>

#include "err.h"
#include "sandbox/spec.h"

/* Each returns 0, or -1 with EINVAL and a message naming the field. On
 * success the caller frees what the request owns (create_req_free,
 * exec_req_free); on failure nothing is left to free. */
/* An egress policy (docs/design/egress.md) as clients send it: its normalised JSON (new
 * reference), or -1 with EINVAL naming the bad entry ("network: allow[2]: ..."). */
int req_network(const json_t *policy, json_t **out, space_err *err);
/* PUT /v1/secrets/{name}: {"value": "...", "hosts": [...]}; *value points into body, hosts gets
 * the binding as normalised JSON text (egress/binding.h). */
int req_secret(json_t *body, const char **value, size_t *len, char *hosts, size_t hosts_len, space_err *err);
int req_create(json_t *body, struct create_req *out, space_err *err);
/* The object of strings at key (absent or null: nothing) into out, each pair checked by the env
 * rules (env) or the metadata rules, NUL refused; shared by every front end. */
int req_string_map(json_t *body, const char *key, bool env, struct strmap *out, space_err *err);
int req_exec(json_t *body, struct exec_req *out, space_err *err);
/* {"rows":R,"cols":C} (each 1..PROTO_PTY_MAX_DIM; absent: 24 x 80). */
int req_pty_size(json_t *v, uint16_t *rows, uint16_t *cols, space_err *err);
int req_fork(json_t *body, int *count, space_err *err);
int req_snapshot(json_t *body, char *name, size_t len, space_err *err);
int req_timeout(json_t *body, struct timeout_req *out, space_err *err);
int req_pool(json_t *body, int *size, space_err *err);
/* A fresh data-plane token: {"token_ttl_s": N} (optional, 1..a day). */
int req_token(json_t *body, int *ttl_s, space_err *err);

#endif
