/* api_nodes.c -- GET /v1/nodes: the cluster's nodes as the store has them (docs/design/cluster.md) */
#include "api.h"
#include "daemon.h"
#include "front/render.h"
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

static json_t *nodes_read(struct store *conn, void *arg, space_err *err)
{
	json_t *list = json_array();

	(void)arg;
	if (!list)
		return NULL;
	if (store_node_each(conn, add_node, list, err) < 0) {
		json_decref(list);
		return NULL;
	}
	return json_pack("{s:o}", "nodes", list);
}

/* Read and rendered on the store's thread. */
void api_nodes_list(struct http_req *r)
{
	api_read_json(r, nodes_read, NULL, NULL);
}
