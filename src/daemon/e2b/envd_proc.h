/* envd_proc.h -- envd's process.Process messages in proto3 JSON, both ways: StartRequest into
 * the core's exec_req, ProcessSelector, ProcessInput, Signal, and the ProcessEvent messages of
 * a stream. Pure (no daemon state); unit-tested in tests/unit/test_envd_process.c. */
#ifndef SPACE_E2B_ENVD_PROC_H
#define SPACE_E2B_ENVD_PROC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "e2b.h"
#include "err.h"
#include "model/model.h"
#include "sandbox/spec.h"

/* StartRequest{process{cmd, args, envs, cwd}, pty{size{cols, rows}}, tag, stdin} for `user`
 * ("" = the template's default) into an exec_req, validated by the /v1 parser (req_exec) so a
 * rule exists once. stdin absent means open (envd's default); a terminal always has input.
 * 0, or -1 with EINVAL naming the field; on success the caller frees out (exec_req_free). */
int envd_start_req(const json_t *body, const char *user, struct exec_req *out, space_err *err);

/* ProcessSelector (the "process" member of body): exactly one of pid (*pid > 0, *tag NULL) or
 * tag (*tag borrowed from body, *pid 0). -1 with EINVAL otherwise. */
int envd_selector(const json_t *body, int *pid, const char **tag, space_err *err);

/* ProcessInput (the "input" member of body): {stdin: b64} or {pty: b64}. *data is malloc'd
 * (free it; non-NULL even when *len is 0), *pty says which one it was. */
int envd_input(const json_t *body, uint8_t **data, size_t *len, bool *pty, space_err *err);

/* The "signal" member of SendSignalRequest: "SIGNAL_SIGKILL", "SIGNAL_SIGTERM" or a number
 * 1..64 (enums may come as numbers). */
int envd_signal(const json_t *body, int *signo, space_err *err);

/* Update's "pty" member: {size: {cols, rows}} (uint32 as numbers or strings). */
int envd_pty_size(const json_t *pty, uint16_t *rows, uint16_t *cols, space_err *err);

/* ---- stream events (new references; NULL when out of memory) ---- */
/* {"event":{"start":{"pid":N}}} */
json_t *envd_event_start(int pid);
/* {"event":{"data":{"<stdout|stderr|pty>":"<base64>"}}} */
json_t *envd_event_data(const char *which, const void *data, size_t len);
/* {"event":{"end":{"exitCode":N,"exited":..,"status":"..","error"?:".."}}} from an ended
 * session: "exit status N" (exited) or "signal: killed" with exitCode -1 (as envd, from Go's
 * os.ProcessState), or a failed session's error. */
json_t *envd_event_end(const struct session_rec *rec);
/* {"event":{"keepalive":{}}} */
json_t *envd_event_keepalive(void);
/* ProcessInfo{config{cmd, args, envs, cwd?}, pid, tag?} of a session. */
json_t *envd_process_info(const struct session_rec *rec);

#endif
