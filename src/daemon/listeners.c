/* listeners.c -- each listener's table, assembled from the front ends' own (docs/design/daemon.md):
 * the control plane lists /v1's routes (the browser page among them), E2B's control routes and MCP's;
 * the data plane /v1's sessions and files and E2B's envd and code interpreter. A front end is
 * its files plus its entries here; an api process's tables are made from the routes'
 * declarations (cluster.h: cluster_routes). */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/files.h"
#include "cluster/cluster.h"
#include "daemon.h"
#include "dataplane/dataplane.h"
#include "e2b/e2b.h"
#include "e2b/e2b_ctl.h"
#include "front/front.h"
#include "listeners.h"
#include "mcp/mcp.h"
#include "ports/ports_front.h"

struct part {
	const struct http_route *routes;
	size_t n;
};

/* The parts one after another, malloc'ed (it lives as long as the process). */
static struct http_route *concat(const struct part *parts, size_t nparts, size_t *n)
{
	struct http_route *t;
	size_t k = 0;

	*n = 0;
	for (size_t i = 0; i < nparts; i++)
		*n += parts[i].n;
	if (!(t = calloc(*n ? *n : 1, sizeof(*t))))
		return NULL;
	for (size_t i = 0; i < nparts; i++) {
		memcpy(t + k, parts[i].routes, parts[i].n * sizeof(*t));
		k += parts[i].n;
	}
	return t;
}

/* An api process (--role api): placed by the routes' declarations; no streamed uploads (bodies
 * are relayed whole, up to CLUSTER_MAX_BODY: larger ones go to the node's own listener). */
static int relayed(struct front_tables *t, bool data, space_err *err)
{
	struct http_route *placed = cluster_routes(t->routes, t->nroutes, data);

	free((void *)t->routes);
	t->routes = placed;
	if (!placed)
		return err_set(err, ENOMEM, "out of memory");
	t->stream_routes = NULL;
	t->nstream_routes = 0;
	t->relay = true;
	t->max_body = CLUSTER_MAX_BODY;
	return 0;
}

static int control_tables(struct spaced *d, struct front_tables *t, space_err *err)
{
	const struct part parts[] = {
		{ api_routes, api_nroutes },
		{ e2b_api_routes, e2b_api_nroutes }, /* E2B_API_URL = this listener */
		{ mcp_routes, mcp_nroutes },         /* MCP's Streamable HTTP transport at /mcp */
	};

	memset(t, 0, sizeof(*t));
	if (!(t->routes = concat(parts, sizeof(parts) / sizeof(parts[0]), &t->nroutes)))
		return err_set(err, ENOMEM, "out of memory");
	const struct part streams[] = {
		{ files_stream_routes, FILES_NSTREAM_ROUTES },
		{ api_stream_routes, api_nstream_routes },
	};
	size_t n;

	if (!(t->stream_routes = concat(streams, sizeof(streams) / sizeof(streams[0]), &n))) {
		free((void *)t->routes);
		return err_set(err, ENOMEM, "out of memory");
	}
	t->nstream_routes = n;
	t->prefixes = e2b_api_prefixes;
	t->nprefixes = e2b_api_nprefixes;
	if (d->cfg.role != DROLE_API)
		return 0;
	free((void *)t->stream_routes);
	return relayed(t, false, err);
}

int listeners_data_tables(struct spaced *d, struct front_tables *t, space_err *err)
{
	const struct part parts[] = {
		{ dp_routes, dp_nroutes },
		{ api_files_dp_routes, api_files_dp_nroutes },
		{ envd_routes, envd_nroutes }, /* E2B_SANDBOX_URL = this listener */
		{ port_dp_routes, port_dp_nroutes }, /* a port's TCP tunnel (spacectl port-forward) */
	};
	const struct part streams[] = {
		{ files_stream_routes, FILES_NSTREAM_ROUTES },
		{ envd_stream_routes, envd_nstream_routes },
	};
	size_t n;

	memset(t, 0, sizeof(*t));
	if (!(t->routes = concat(parts, sizeof(parts) / sizeof(parts[0]), &t->nroutes)))
		return err_set(err, ENOMEM, "out of memory");
	if (!(t->stream_routes = concat(streams, sizeof(streams) / sizeof(streams[0]), &n))) {
		free((void *)t->routes);
		return err_set(err, ENOMEM, "out of memory");
	}
	t->nstream_routes = n;
	t->prefixes = envd_prefixes;
	t->nprefixes = envd_nprefixes;
	t->host_takes = port_host_takes; /* {port}-{id}.{--ports-domain}: a sandbox's port */
	t->host_handler = port_handle;
	if (d->cfg.role != DROLE_API)
		return 0;
	free((void *)t->stream_routes);
	return relayed(t, true, err);
}

int listeners_start(struct spaced *d, space_err *err)
{
	struct front_tables ctl, data;

	e2b_api_url(d->cfg.listen, d->e2b_api_url, sizeof(d->e2b_api_url));
	if (control_tables(d, &ctl, err) < 0 || api_start(d, &ctl, err) < 0)
		return -1;
	if (listeners_data_tables(d, &data, err) < 0 || dataplane_start(d, &data, err) < 0)
		return -1;
	return 0;
}
