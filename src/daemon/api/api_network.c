/* api_network.c -- PUT /v1/sandboxes/{id}/network (its egress policy) and
 * GET /v1/sandboxes/{id}/egress (what its gateway decided) */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "front/req.h"
#include "net/net.h"
#include "sandbox/sandbox.h"

#define EGRESS_LIMIT_DEFAULT 1000

/* The policy's secret values are read on the store's thread; the policy is stored and sent on
 * the loop, in force at the gateway before the reply. */
struct net_job {
	char *id;
	json_t *network;
	json_t *resolved;
};

static int net_read(struct store *conn, void *arg, space_err *err)
{
	struct net_job *j = arg;

	if (egress_check_bindings(conn, j->network, err) < 0)
		return -1;
	j->resolved = egress_resolve(conn, j->network, err);
	return j->resolved ? 0 : -1;
}

static void net_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *rerr)
{
	struct net_job *j = arg;
	struct sandbox_rec sb = { 0 };
	space_err err = { 0 };

	if (rc < 0)
		http_reply_err(req, rerr);
	else if (sandbox_set_network(d, j->id, j->network, j->resolved, &sb, &err) < 0)
		http_reply_err(req, &err);
	else
		http_reply_json(req, 200, json_incref(sb.network));
	sandbox_rec_clear(&sb);
}

static void net_release(void *arg)
{
	struct net_job *j = arg;

	egress_resolved_free(j->resolved);
	json_decref(j->network);
	free(j->id);
	free(j);
}

void api_sandboxes_network(struct http_req *r)
{
	space_err err = { 0 };
	json_t *network = NULL, *body = http_body_json(r);
	struct net_job *j;

	if (!body)
		return;
	if (req_network(body, &network, &err) < 0) {
		http_reply_err(r->req, &err);
	} else if (!(j = calloc(1, sizeof(*j))) || !(j->id = strdup(r->param[0]))) {
		free(j);
		json_decref(network);
		http_reply_error(r->req, 500, "internal", "out of memory");
	} else {
		j->network = network;
		/* (one this process does not hold is refused now, from the record read before) */
		if (sandbox_find(r->d, j->id))
			api_read(r, net_read, net_reply, net_release, j);
		else {
			net_reply(r->d, r->req, j, 0, &err);
			net_release(j);
		}
	}
	json_decref(body);
}

void api_sandboxes_egress(struct http_req *r)
{
	struct sandbox_rec sb = { 0 };
	const char *q = http_query(r, "limit");
	char dir[PATH_MAX];
	space_err err = { 0 };
	uint64_t limit = EGRESS_LIMIT_DEFAULT;
	json_t *records;

	if (q && (http_parse_u64(q, &limit) < 0 || limit < 1 || limit > NET_AUDIT_LIMIT_MAX)) {
		http_reply_error(r->req, 400, "bad_request", "limit must be an integer from 1 to %d",
				 NET_AUDIT_LIMIT_MAX);
		return;
	}
	if (api_sandbox_param(r, 0, &sb) < 0)
		return;
	path_egress_dir(r->d, sb.id, dir);
	sandbox_rec_clear(&sb);
	if (net_audit_read(dir, (size_t)limit, &records, &err) < 0) {
		http_reply_err(r->req, &err);
		return;
	}
	http_reply_json(r->req, 200, json_pack("{s:o}", "records", records));
}
