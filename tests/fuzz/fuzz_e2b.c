/* fuzz_e2b.c -- libFuzzer target: what the E2B front end (src/daemon/e2b/) parses from clients
 * and from the guest, through its pure parsers.
 *
 * Input: byte 0 picks the parser (mod 5), the rest is its input:
 *   0  a Connect envelope (connect_envelope_parse), as a streaming call's request body;
 *   1  a code-interpreter line from the guest (interp_line_check);
 *   2  a JSON body (the daemon's own http_parse_json_object) offered to every E2B request
 *      parser: create, network update, timeout, fork, snapshot, process Start, selector, input,
 *      signal, PTY size, /execute, /contexts;
 *   3  query values: the list's metadata filter, states, limit, and an Authorization header;
 *   4  a line of the agent's watch (envd_watch_event) and an agent Entry (envd_entry_info).
 * Besides the sanitizers, the contract is checked: a refusal carries EINVAL (ENOMEM at most)
 * and a message; what is accepted is within its bounds; a guest line re-encoded is accepted
 * again unchanged. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b/connect.h"
#include "e2b/e2b.h"
#include "e2b/e2b_ctl.h"
#include "e2b/envd_fs.h"
#include "e2b/envd_proc.h"
#include "e2b/interp_line.h"
#include "http/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MUST(c) do { if (!(c)) { fprintf(stderr, "fuzz_e2b: %s:%d: %s\n", __FILE__, __LINE__, #c); abort(); } } while (0)

static void refused(int rc, const space_err *err)
{
	MUST(rc == -1);
	MUST(err->code == EINVAL || err->code == ENOMEM);
	MUST(err->msg[0] != '\0');
}

static void try_envelope(const uint8_t *p, size_t n)
{
	space_err err = { 0 };
	uint8_t flags = 0;
	size_t used = 0;
	json_t *msg = NULL;
	int rc = connect_envelope_parse(p, n, &flags, &msg, &used, &err);

	if (rc == 0) {
		MUST(json_is_object(msg) && used >= 5 && used <= n && !(flags & CONNECT_FLAG_COMPRESSED));
		json_decref(msg);
	} else if (rc == 1) {
		MUST(!msg);
	} else {
		MUST(!msg);
		refused(rc, &err);
	}
}

static void try_line(const uint8_t *p, size_t n)
{
	enum interp_line_type t, t2;
	char *out = interp_line_check((const char *)p, n, &t);
	char *again;

	if (!out) {
		MUST(t == INTERP_LINE_BAD);
		return;
	}
	MUST(t != INTERP_LINE_BAD && !strchr(out, '\n'));
	again = interp_line_check(out, strlen(out), &t2);
	MUST(again && t2 == t && strcmp(again, out) == 0);
	free(again);
	free(out);
}

static void try_bodies(json_t *body)
{
	space_err err = { 0 };
	struct create_req cr;
	struct exec_req er;
	struct timeout_req tr;
	json_t *net = NULL;
	bool set = false, pty = false;
	int count = 0, pid = 0, signo = 0, rc;
	uint16_t rows = 0, cols = 0;
	const char *tag = NULL;
	uint8_t *in = NULL;
	size_t len = 0;
	char name[128], ctx[INTERP_MAX_CTX_ID + 1], cwd[INTERP_MAX_CWD + 1], *line = NULL;

	if ((rc = e2b_req_create(body, &cr, &err)) == 0) {
		MUST(cr.template_ref[0] || cr.snapshot[0]);
		MUST(cr.timeout_s >= 0 && cr.timeout_s <= SPEC_TIMEOUT_MAX && cr.metadata.n <= SPEC_META_MAX);
		create_req_free(&cr);
	} else {
		refused(rc, &(err));
	}
	memset(&err, 0, sizeof(err));
	if ((rc = e2b_req_network_update(body, &net, &err)) == 0)
		json_decref(net);
	else
		refused(rc, &err);
	memset(&err, 0, sizeof(err));
	if ((rc = e2b_req_timeout(body, "timeout", &tr, &set, &err)) == 0)
		MUST(!set || (tr.timeout_s >= 0 && tr.timeout_s <= SPEC_TIMEOUT_MAX));
	else
		refused(rc, &err);
	memset(&err, 0, sizeof(err));
	if ((rc = e2b_req_fork(body, &count, &tr, &set, &err)) == 0)
		MUST(count >= 1 && count <= SPEC_FORK_MAX);
	else
		refused(rc, &err);
	memset(&err, 0, sizeof(err));
	if ((rc = e2b_req_snapshot(body, name, sizeof(name), &err)) == 0)
		MUST(memchr(name, '\0', sizeof(name)));
	else
		refused(rc, &err);
	memset(&err, 0, sizeof(err));
	if ((rc = envd_start_req(body, "", &er, &err)) == 0) {
		MUST(er.argv.n >= 1 && er.argv.n <= SPEC_ARGV_MAX);
		exec_req_free(&er);
	} else {
		refused(rc, &err);
	}
	memset(&err, 0, sizeof(err));
	if ((rc = envd_selector(body, &pid, &tag, &err)) == 0)
		MUST((pid > 0) != (tag != NULL));
	else
		refused(rc, &err);
	memset(&err, 0, sizeof(err));
	if ((rc = envd_input(body, &in, &len, &pty, &err)) == 0)
		MUST(in != NULL);
	else
		refused(rc, &err);
	free(in);
	memset(&err, 0, sizeof(err));
	if ((rc = envd_signal(body, &signo, &err)) == 0)
		MUST(signo >= 1 && signo <= 64);
	else
		refused(rc, &err);
	memset(&err, 0, sizeof(err));
	if ((rc = envd_pty_size(json_object_get(body, "pty"), &rows, &cols, &err)) == 0)
		MUST(rows >= 1 && cols >= 1);
	else
		refused(rc, &err);
	memset(&err, 0, sizeof(err));
	if ((rc = interp_execute_parse(body, &line, ctx, &err)) == 0) {
		size_t l = strlen(line);

		MUST(l > 0 && line[l - 1] == '\n' && !memchr(line, '\n', l - 1));
		MUST(memchr(ctx, '\0', sizeof(ctx)));
		free(line);
	} else {
		refused(rc, &err);
	}
	memset(&err, 0, sizeof(err));
	if ((rc = interp_context_parse(body, cwd, &err)) == 0)
		MUST(memchr(cwd, '\0', sizeof(cwd)));
	else
		refused(rc, &err);
}

static void try_queries(const char *s)
{
	space_err err = { 0 };
	struct strmap m = { 0 };
	unsigned mask = 0;
	int limit = 0, rc;
	char user[ENVD_USER_MAX];

	if ((rc = e2b_req_metadata_filter(s, &m, &err)) == 0)
		MUST(m.n <= E2B_FILTER_MAX);
	else
		refused(rc, &err);
	strmap_free(&m);
	memset(&err, 0, sizeof(err));
	if ((rc = e2b_req_states(s, &mask, &err)) != 0)
		refused(rc, &err);
	memset(&err, 0, sizeof(err));
	if ((rc = e2b_req_limit(s, &limit, &err)) == 0)
		MUST(limit >= 1);
	else
		refused(rc, &err);
	memset(&err, 0, sizeof(err));
	if ((rc = envd_basic_user(s, user, sizeof(user), &err)) == 0)
		MUST(memchr(user, '\0', sizeof(user)));
	else
		refused(rc, &err);
}

static void try_agent(const uint8_t *p, size_t n)
{
	space_err err = { 0 };
	static struct envd_watch_state st; /* kept across inputs, as a watch keeps it across lines */
	json_t *ev = NULL, *e;
	int rc = envd_watch_event(&st, "/d", (const char *)p, n, &ev);

	MUST(rc >= -1 && rc <= 1);
	MUST(rc >= 0 ? json_is_array(ev) && json_array_size(ev) <= 2 : !ev);
	MUST(memchr(st.landing, '\0', sizeof(st.landing)));
	json_decref(ev);
	e = http_parse_json_object((const char *)p, n, &err);
	if (e) {
		json_decref(envd_entry_info(e));
		json_decref(e);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	space_err err = { 0 };
	char *s;
	json_t *body;

	if (size < 1)
		return 0;
	switch (data[0] % 5) {
	case 0:
		try_envelope(data + 1, size - 1);
		break;
	case 1:
		try_line(data + 1, size - 1);
		break;
	case 2:
		body = http_parse_json_object((const char *)data + 1, size - 1, &err);
		if (body) {
			try_bodies(body);
			json_decref(body);
		}
		break;
	case 3:
		s = strndup((const char *)data + 1, size - 1);
		MUST(s);
		try_queries(s);
		free(s);
		break;
	default:
		try_agent(data + 1, size - 1);
		break;
	}
	return 0;
}
