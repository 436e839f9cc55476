/* api_nodes.c -- GET /v1/nodes: the cluster's nodes as the store has them (docs/design/cluster.md) */
#include "api.h"
#include "daemon.h"
#include "api/render.h"
#include "store/store.h"

static int add_node(const struct node_rec *n, void *arg)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:{s:i,s:i},s:{s:i,s:i,s:i},s:o,s:o,s:o}", "id", n->id, "state",
			      node_state_name(n->state), "api_url", n->api_url, "data_url", n->data_url, "capacity",
			      "memory_mib", n->memory_mib, "vcpus", n->vcpus, "used", "memory_mib",
			      n->used_memory_mib, "vcpus", n->used_vcpus, "sandboxes", n->sandboxes, "started_at",
			      render_time(n->started_ms), "renewed_at", render_time(n->renewed_ms),
			      "lease_expires_at", render_time(n->lease_expires_ms));

	return j ? json_array_append_new(arg, j) : -1;
}

void api_nodes_list(struct http_req *r)
{
	json_t *list = json_array();
	space_err err = { 0 };

	if (!list) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	if (store_node_each(r->d->store, add_node, list, &err) < 0) {
		json_decref(list);
		http_reply_err(r->req, &err);
		return;
	}
	http_reply_json(r->req, 200, json_pack("{s:o}", "nodes", list));
}
