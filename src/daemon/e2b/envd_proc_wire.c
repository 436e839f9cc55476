/* envd_proc_wire.c -- process.Process's proto3 JSON messages: requests parsed into the core's
 * typed requests (checked by the core's validators, spec.h), events and listings rendered */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "front/req.h"
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

/* The StartRequest's process: argv (cmd, then args), env, cwd. */
static int start_process(const json_t *proc, struct exec_req *out, space_err *err)
{
	const json_t *cmd = json_object_get(proc, "cmd"), *args = json_object_get(proc, "args");
	const json_t *cwd = json_object_get(proc, "cwd"), *v;
	size_t i;

	if (!json_is_object(proc))
		return err_set(err, EINVAL, "process is required: {\"cmd\":..., \"args\":[...]}");
	if (!json_is_string(cmd) || !json_string_length(cmd))
		return err_set(err, EINVAL, "process.cmd must be a non-empty string");
	if (!absent(args) && !json_is_array(args))
		return err_set(err, EINVAL, "process.args must be an array of strings");
	if (json_array_size(args) >= SPEC_ARGV_MAX)
		return err_set(err, EINVAL, "argv must be an array of 1 to %d strings", SPEC_ARGV_MAX);
	if (spec_check_argv_entry(0, json_string_value(cmd), json_string_length(cmd), err) < 0 ||
	    strlist_add(&out->argv, json_string_value(cmd)) < 0)
		return err->code ? -1 : err_set(err, ENOMEM, "out of memory");
	json_array_foreach(args, i, v) {
		if (!json_is_string(v))
			return err_set(err, EINVAL, "argv[%zu] must be a string", i + 1);
		/* the NUL check needs JSON's length; the rest is spec_check_exec's */
		if (spec_check_argv_entry(i + 1, json_string_value(v), json_string_length(v), err) < 0 ||
		    strlist_add(&out->argv, json_string_value(v)) < 0)
			return err->code ? -1 : err_set(err, ENOMEM, "out of memory");
	}
	if (req_string_map((json_t *)proc, "envs", true, &out->env, err) < 0)
		return -1;
	if (absent(cwd))
		return 0;
	if (!json_is_string(cwd) || json_string_length(cwd) >= sizeof(out->cwd) ||
	    strlen(json_string_value(cwd)) != json_string_length(cwd))
		return err_set(err, EINVAL, "cwd must be a string of at most %zu bytes", sizeof(out->cwd) - 1);
	snprintf(out->cwd, sizeof(out->cwd), "%s", json_string_value(cwd));
	return 0;
}

/* The StartRequest's tag (its bytes checked here: JSON's length finds a NUL). */
static int start_tag(const json_t *tag, struct exec_req *out, space_err *err)
{
	if (absent(tag))
		return 0;
	if (!json_is_string(tag) || spec_check_tag(json_string_value(tag), json_string_length(tag), err) < 0)
		return err->code ? -1 : err_set(err, EINVAL, "tag must be a string");
	snprintf(out->tag, sizeof(out->tag), "%s", json_string_value(tag));
	return 0;
}

/* The StartRequest's stdin (open unless false: envd's default) and pty. */
static int start_io(const json_t *body, struct exec_req *out, space_err *err)
{
	const json_t *in = json_object_get(body, "stdin"), *pty = json_object_get(body, "pty");

	if (!absent(in) && !json_is_boolean(in))
		return err_set(err, EINVAL, "stdin must be true or false");
	out->stdin_open = absent(in) || json_is_true(in);
	if (absent(pty))
		return 0;
	if (envd_pty_size(pty, &out->pty_rows, &out->pty_cols, err) < 0)
		return -1;
	out->stdin_open = true; /* a terminal always has input */
	return 0;
}

/* The StartRequest filled into the core's typed exec directly, then checked by the core's
 * validator (spec_check_exec), as /v1's req_exec is. */
int envd_start_req(const json_t *body, const char *user, struct exec_req *out, space_err *err)
{
	memset(out, 0, sizeof(*out));
	if (start_tag(json_object_get(body, "tag"), out, err) < 0 ||
	    start_process(json_object_get(body, "process"), out, err) < 0)
		goto fail;
	if (user && strlen(user) >= sizeof(out->user)) {
		err_set(err, EINVAL, "user must be a string of at most %zu bytes", sizeof(out->user) - 1);
		goto fail;
	}
	snprintf(out->user, sizeof(out->user), "%s", user ? user : "");
	if (start_io(body, out, err) < 0 || spec_check_exec(out, err) < 0)
		goto fail;
	return 0;
fail:
	exec_req_free(out);
	return -1;
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
