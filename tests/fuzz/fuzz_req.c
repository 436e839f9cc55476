/* fuzz_req.c -- libFuzzer target: control-plane JSON bodies through the daemon's own body
 * parser (http_parse_json_object) into every typed request of src/daemon/api/req.c (and so
 * the validators of sandbox/spec.c).
 *
 * Each input is one request body; it is offered to every request type, as any route could
 * receive it.  Besides the sanitizers, the request contract is checked: a refusal carries
 * EINVAL (ENOMEM at most) and a message; an accepted request holds only values the
 * validators allow. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "front/req.h"
#include "http/http.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken contract is a finding: abort so libFuzzer (and the replay) report it. */
#define MUST(c) do { if (!(c)) { fprintf(stderr, "fuzz_req: %s:%d: %s\n", __FILE__, __LINE__, #c); abort(); } } while (0)

static void refused(int rc, const space_err *err)
{
	MUST(rc == -1);
	MUST(err->code == EINVAL || err->code == ENOMEM);
	MUST(err->msg[0] != '\0');
}

static void check_env(const struct strmap *m)
{
	MUST(m->n <= SPEC_ENV_MAX);
	for (size_t i = 0; i < m->n; i++)
		MUST(m->keys[i] && m->values[i] && m->keys[i][0]);
}

static void try_create(json_t *body)
{
	struct create_req r;
	space_err err = { 0 };
	int rc = req_create(body, &r, &err);

	if (rc < 0) {
		refused(rc, &err);
		return;
	}
	MUST(rc == 0 && !err.code);
	MUST(!r.template_ref[0] != !r.snapshot[0]);
	MUST(strnlen(r.template_ref, sizeof(r.template_ref)) < sizeof(r.template_ref));
	MUST(strnlen(r.snapshot, sizeof(r.snapshot)) < sizeof(r.snapshot));
	MUST(r.vcpus >= 0 && r.vcpus <= SPEC_VCPUS_MAX);
	MUST(r.memory_mib == 0 || (r.memory_mib >= SPEC_MEMORY_MIN && r.memory_mib <= SPEC_MEMORY_MAX));
	MUST(r.timeout_s >= 0 && r.timeout_s <= SPEC_TIMEOUT_MAX);
	MUST(r.metadata.n <= SPEC_META_MAX);
	check_env(&r.env);
	create_req_free(&r);
}

static void try_exec(json_t *body)
{
	struct exec_req r;
	space_err err = { 0 };
	int rc = req_exec(body, &r, &err);

	if (rc < 0) {
		refused(rc, &err);
		return;
	}
	MUST(r.argv.n >= 1 && r.argv.n <= SPEC_ARGV_MAX);
	for (size_t i = 0; i < r.argv.n; i++)
		MUST(r.argv.v[i] != NULL);
	MUST(strnlen(r.cwd, sizeof(r.cwd)) < sizeof(r.cwd));
	MUST(strnlen(r.user, sizeof(r.user)) < sizeof(r.user));
	MUST(r.token_ttl_s >= 0 && r.token_ttl_s <= SPEC_TOKEN_TTL_MAX);
	check_env(&r.env);
	exec_req_free(&r);
}

static void try_small(json_t *body)
{
	space_err err = { 0 };
	struct timeout_req t;
	char name[SPEC_NAME_MAX + 1];
	int n = -7, rc;

	rc = req_fork(body, &n, &err);
	if (rc < 0)
		refused(rc, &err);
	else
		MUST(n >= 1 && n <= SPEC_FORK_MAX);
	err_clear(&err);
	rc = req_snapshot(body, name, sizeof(name), &err);
	if (rc < 0) {
		refused(rc, &err);
	} else {
		space_err again = { 0 };
		MUST(spec_check_snapshot_name(name, &again) == 0);
	}
	err_clear(&err);
	rc = req_timeout(body, &t, &err);
	if (rc < 0)
		refused(rc, &err);
	else
		MUST(t.timeout_s >= 0 && t.timeout_s <= SPEC_TIMEOUT_MAX);
	err_clear(&err);
	rc = req_pool(body, &n, &err);
	if (rc < 0)
		refused(rc, &err);
	else
		MUST(n >= 0 && n <= SPEC_POOL_MAX);
	err_clear(&err);
	rc = req_token(body, &n, &err);
	if (rc < 0)
		refused(rc, &err);
	else
		MUST(n >= 0 && n <= SPEC_TOKEN_TTL_MAX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	space_err err = { 0 };
	json_t *body;

	log_set_level(LOG_ERROR);
	body = http_parse_json_object((const char *)data, size, &err);
	if (!body) {
		MUST(err.code == EINVAL && err.msg[0]);
		return 0;
	}
	try_create(body);
	try_exec(body);
	try_small(body);
	json_decref(body);
	return 0;
}
