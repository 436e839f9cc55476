/* api_network.c -- PUT /v1/sandboxes/{id}/network (its egress policy) and
 * GET /v1/sandboxes/{id}/egress (what its gateway decided) */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api/req.h"
#include "net/net.h"
#include "sandbox/sandbox.h"

#define EGRESS_LIMIT_DEFAULT 1000

void api_sandboxes_network(struct http_req *r)
{
	struct sandbox_rec sb = { 0 };
	space_err err = { 0 };
	json_t *network = NULL, *body = http_body_json(r);

	if (!body)
		return;
	if (req_network(body, &network, &err) < 0 || sandbox_set_network(r->d, r->param[0], network, &sb, &err) < 0)
		http_reply_err(r->req, &err);
	else
		http_reply_json(r->req, 200, json_incref(sb.network));
	json_decref(network);
	json_decref(body);
	sandbox_rec_clear(&sb);
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
