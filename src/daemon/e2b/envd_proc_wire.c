/* envd_proc_wire.c -- process.Process's proto3 JSON messages: requests parsed into the core's
 * typed requests (through the /v1 parsers' validators), events and listings rendered */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "api/req.h"
#include "envd_proc.h"
#include "proto.h"

/* A new JSON string of data in standard base64. */
static json_t *b64_json(const void *data, size_t len)
{
	size_t need = 4 * ((len + 2) / 3) + 1;
	unsigned char *buf;
	json_t *j;
	int n;

	if (len > (1u << 28) || !(buf = malloc(need)))
		return NULL;
	n = len ? EVP_EncodeBlock(buf, data, (int)len) : 0;
	j = json_stringn_nocheck((const char *)buf, (size_t)n);
	free(buf);
	return j;
}

/* ---- requests ---- */

/* A uint32 as proto3 JSON writes it (a number) or may (a decimal string). */
static int get_u32(const json_t *v, const char *what, uint32_t max, uint32_t *out, space_err *err)
{
	long long x = -1;

	if (json_is_integer(v)) {
		x = json_integer_value(v);
	} else if (json_is_string(v)) {
		const char *s = json_string_value(v);
		char *end = NULL;

		errno = 0;
		if (*s >= '0' && *s <= '9' && strlen(s) <= 10) {
			x = strtoll(s, &end, 10);
			if (errno || *end)
				x = -1;
		}
	}
	if (x < 0 || x > (long long)max)
		return err_set(err, EINVAL, "%s must be an integer 0..%u", what, max);
	*out = (uint32_t)x;
	return 0;
}

static bool absent(const json_t *v)
{
	return !v || json_is_null(v);
}

int envd_pty_size(const json_t *pty, uint16_t *rows, uint16_t *cols, space_err *err)
{
	const json_t *size = json_object_get(pty, "size");
	uint32_t r = 0, c = 0;

	if (!json_is_object(pty) || !json_is_object(size))
		return err_set(err, EINVAL, "pty must be {\"size\":{\"cols\":N,\"rows\":N}}");
	if (get_u32(json_object_get(size, "rows"), "pty.size.rows", PROTO_PTY_MAX_DIM, &r, err) < 0 ||
	    get_u32(json_object_get(size, "cols"), "pty.size.cols", PROTO_PTY_MAX_DIM, &c, err) < 0)
		return -1;
	if (r < 1 || c < 1)
		return err_set(err, EINVAL, "pty.size.rows and cols must be 1..%d", PROTO_PTY_MAX_DIM);
	*rows = (uint16_t)r;
	*cols = (uint16_t)c;
	return 0;
}

/* The StartRequest as the /v1 exec body req_exec takes: {argv, env, cwd, user, stdin, pty}. */
static json_t *v1_exec_body(const json_t *body, const char *user, space_err *err)
{
	const json_t *proc = json_object_get(body, "process"), *cmd = json_object_get(proc, "cmd");
	const json_t *args = json_object_get(proc, "args"), *envs = json_object_get(proc, "envs");
	const json_t *cwd = json_object_get(proc, "cwd"), *pty = json_object_get(body, "pty");
	const json_t *in = json_object_get(body, "stdin"), *v;
	json_t *out = json_object(), *argv = json_array();
	uint16_t rows, cols;
	size_t i;

	if (!out || !argv) {
		err_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	if (!json_is_object(proc)) {
		err_set(err, EINVAL, "process is required: {\"cmd\":..., \"args\":[...]}");
		goto fail;
	}
	if (!json_is_string(cmd) || !json_string_length(cmd)) {
		err_set(err, EINVAL, "process.cmd must be a non-empty string");
		goto fail;
	}
	if (!absent(args) && !json_is_array(args)) {
		err_set(err, EINVAL, "process.args must be an array of strings");
		goto fail;
	}
	/* Each entry is checked by req_exec (strings, sizes, count). */
	if (json_array_append(argv, (json_t *)cmd) < 0) {
		err_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	json_array_foreach(args, i, v) {
		if (json_array_size(argv) > SPEC_ARGV_MAX)
			break;
		if (json_array_append(argv, (json_t *)v) < 0) {
			err_set(err, ENOMEM, "out of memory");
			goto fail;
		}
	}
	if (json_object_set(out, "argv", argv) < 0 ||
	    (!absent(envs) && json_object_set(out, "env", (json_t *)envs) < 0) ||
	    (!absent(cwd) && json_object_set(out, "cwd", (json_t *)cwd) < 0) ||
	    (user && *user && json_object_set_new(out, "user", json_string(user)) < 0)) {
		err_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	if (!absent(in) && !json_is_boolean(in)) {
		err_set(err, EINVAL, "stdin must be true or false");
		goto fail;
	}
	if (json_object_set_new(out, "stdin", json_boolean(absent(in) || json_is_true(in))) < 0) {
		err_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	if (!absent(pty)) {
		if (envd_pty_size(pty, &rows, &cols, err) < 0)
			goto fail;
		if (json_object_set_new(out, "pty", json_pack("{s:i,s:i}", "rows", rows, "cols", cols)) < 0) {
			err_set(err, ENOMEM, "out of memory");
			goto fail;
		}
	}
	json_decref(argv);
	return out;
fail:
	json_decref(argv);
	json_decref(out);
	return NULL;
}

int envd_start_req(const json_t *body, const char *user, struct exec_req *out, space_err *err)
{
	const json_t *tag = json_object_get(body, "tag");
	json_t *v1;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!absent(tag) && (!json_is_string(tag) ||
			     spec_check_tag(json_string_value(tag), json_string_length(tag), err) < 0))
		return err->code ? -1 : err_set(err, EINVAL, "tag must be a string");
	v1 = v1_exec_body(body, user, err);
	if (!v1)
		return -1;
	rc = req_exec(v1, out, err);
	json_decref(v1);
	if (rc == 0 && json_is_string(tag))
		snprintf(out->tag, sizeof(out->tag), "%s", json_string_value(tag));
	return rc;
}

int envd_selector(const json_t *body, int *pid, const char **tag, space_err *err)
{
	const json_t *sel = json_object_get(body, "process");
	const json_t *p = json_object_get(sel, "pid"), *t = json_object_get(sel, "tag");
	uint32_t v = 0;

	*pid = 0;
	*tag = NULL;
	if (!json_is_object(sel) || absent(p) == absent(t))
		return err_set(err, EINVAL, "process must select one process: {\"pid\":N} or {\"tag\":\"...\"}");
	if (!absent(t)) {
		if (!json_is_string(t) || spec_check_tag(json_string_value(t), json_string_length(t), err) < 0)
			return err->code ? -1 : err_set(err, EINVAL, "process.tag must be a string");
		*tag = json_string_value(t);
		return 0;
	}
	if (get_u32(p, "process.pid", 0x7fffffff, &v, err) < 0)
		return -1;
	if (v == 0)
		return err_set(err, EINVAL, "process.pid must be a process id (> 0)");
	*pid = (int)v;
	return 0;
}

int envd_input(const json_t *body, uint8_t **data, size_t *len, bool *pty, space_err *err)
{
	const json_t *in = json_object_get(body, "input");
	const json_t *s = json_object_get(in, "stdin"), *p = json_object_get(in, "pty"), *v;
	ssize_t n;

	*data = NULL;
	*len = 0;
	if (!json_is_object(in) || absent(s) == absent(p))
		return err_set(err, EINVAL, "input must be {\"stdin\":<base64>} or {\"pty\":<base64>}");
	v = absent(s) ? p : s;
	*pty = absent(s);
	if (!json_is_string(v))
		return err_set(err, EINVAL, "input.%s must be base64", *pty ? "pty" : "stdin");
	*data = malloc(3 * (json_string_length(v) / 4) + 3);
	if (!*data)
		return err_set(err, ENOMEM, "out of memory");
	n = envd_b64_decode(json_string_value(v), json_string_length(v), *data);
	if (n < 0) {
		free(*data);
		*data = NULL;
		return err_set(err, EINVAL, "input.%s must be base64", *pty ? "pty" : "stdin");
	}
	*len = (size_t)n;
	return 0;
}

int envd_signal(const json_t *body, int *signo, space_err *err)
{
	const json_t *v = json_object_get(body, "signal");
	uint32_t n = 0;

	if (json_is_string(v)) {
		if (strcmp(json_string_value(v), "SIGNAL_SIGKILL") == 0) {
			*signo = 9;
			return 0;
		}
		if (strcmp(json_string_value(v), "SIGNAL_SIGTERM") == 0) {
			*signo = 15;
			return 0;
		}
	}
	if (json_is_integer(v) && get_u32(v, "signal", 64, &n, err) == 0 && n > 0) {
		*signo = (int)n;
		return 0;
	}
	return err_set(err, EINVAL, "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
}

/* ---- events ---- */

json_t *envd_event_start(int pid)
{
	return json_pack("{s:{s:{s:i}}}", "event", "start", "pid", pid);
}

json_t *envd_event_data(const char *which, const void *data, size_t len)
{
	json_t *b = b64_json(data, len);

	return b ? json_pack("{s:{s:{s:o}}}", "event", "data", which, b) : NULL;
}

json_t *envd_event_keepalive(void)
{
	return json_pack("{s:{s:{}}}", "event", "keepalive");
}

/* What Go's syscall.Signal.String() says (envd's status is os.ProcessState.String()). */
static const char *signal_text(int sig, char buf[32])
{
	static const char *const names[] = {
		NULL,           "hangup",       "interrupt",    "quit",
		"illegal instruction", "trace/breakpoint trap", "aborted", "bus error",
		"floating point exception", "killed", "user defined signal 1", "segmentation fault",
		"user defined signal 2", "broken pipe", "alarm clock", "terminated",
	};

	if (sig > 0 && sig < (int)(sizeof(names) / sizeof(names[0])))
		return names[sig];
	snprintf(buf, 32, "signal %d", sig);
	return buf;
}

json_t *envd_event_end(const struct session_rec *rec)
{
	char status[64], sigbuf[32];

	if (rec->state == SESS_FAILED)
		return json_pack("{s:{s:{s:i,s:b,s:s,s:s}}}", "event", "end", "exitCode", -1, "exited", 0,
				 "status", "error", "error", rec->error[0] ? rec->error : "the process failed");
	/* envd's error is Go's cmd.Wait() error: an ExitError, whose text is ProcessState.String()
	 * (the status), for a signal or a non-zero exit; none for exit 0. */
	if (rec->exit_signal > 0) {
		snprintf(status, sizeof(status), "signal: %s", signal_text(rec->exit_signal, sigbuf));
		return json_pack("{s:{s:{s:i,s:b,s:s,s:s}}}", "event", "end", "exitCode", -1, "exited", 0, "status",
				 status, "error", status);
	}
	snprintf(status, sizeof(status), "exit status %d", rec->exit_code);
	if (rec->exit_code != 0)
		return json_pack("{s:{s:{s:i,s:b,s:s,s:s}}}", "event", "end", "exitCode", rec->exit_code, "exited", 1,
				 "status", status, "error", status);
	return json_pack("{s:{s:{s:i,s:b,s:s}}}", "event", "end", "exitCode", 0, "exited", 1, "status", status);
}

json_t *envd_process_info(const struct session_rec *rec)
{
	json_t *args = json_array(), *envs, *cfg, *info;
	size_t i;

	if (!args)
		return NULL;
	for (i = 1; i < json_array_size(rec->argv); i++)
		if (json_array_append(args, json_array_get(rec->argv, i)) < 0) {
			json_decref(args);
			return NULL;
		}
	envs = json_is_object(rec->env) ? json_incref(rec->env) : json_object();
	cfg = json_pack("{s:s,s:o,s:o}", "cmd", json_string_value(json_array_get(rec->argv, 0)) ?: "", "args",
			args, "envs", envs);
	if (cfg && rec->cwd[0] && json_object_set_new(cfg, "cwd", json_string(rec->cwd)) < 0) {
		json_decref(cfg);
		cfg = NULL;
	}
	if (!cfg)
		return NULL;
	info = json_pack("{s:o,s:i}", "config", cfg, "pid", rec->pid);
	if (info && rec->tag[0] && json_object_set_new(info, "tag", json_string(rec->tag)) < 0) {
		json_decref(info);
		info = NULL;
	}
	return info;
}
