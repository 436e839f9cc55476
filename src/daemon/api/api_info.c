/* api_info.c -- GET /v1/info: version, accelerator, data-plane URL, capacity, uptime, E2B's URLs */
#include <stdlib.h>
#include <unistd.h>

#include "api.h"
#include "front/port_names.h"
#include "log.h"
#include "store/store.h"
#include "sandbox/sandbox.h"

static void info_reply(struct spaced *d, struct evhttp_request *req, const struct capacity *c)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	int64_t mem_mib = pages > 0 && page > 0 ? (int64_t)pages * page / (1024 * 1024) : 0;
	int64_t up = d->started_ms > 0 ? (now_ms() - d->started_ms) / 1000 : 0;
	char pattern[512];

	port_url(d->cfg.data_url, d->cfg.ports_domain, 0, "{id}", pattern, sizeof(pattern));
	http_reply_json(req, 200,
			json_pack("{s:s,s:s,s:s,s:s,s:{s:i,s:i,s:I,s:I,s:i,s:i,s:i,s:i,s:I},s:I,s:{s:s,s:s},s:{s:s,s:s},"
				  "s:s,s:s,s:s?}",
				  "version", SPACE_VERSION,
				  "accelerator", accel_name(d->accel),
				  "accelerator_reason", d->accel_reason,
				  "data_plane_url", d->cfg.data_url,
				  "capacity",
				  "max_sandboxes", c->max_sandboxes,
				  "sandboxes_running", c->running,
				  "host_vcpus", (json_int_t)(cpus > 0 ? cpus : 1),
				  "host_memory_mib", (json_int_t)mem_mib,
				  "memory_budget_mib", c->memory_budget_mib,
				  "memory_used_mib", c->memory_used_mib,
				  "vcpu_budget", c->vcpu_budget,
				  "vcpus_used", c->vcpus_used,
				  "tmpfs_free_mib", (json_int_t)c->tmpfs_free_mib,
				  "uptime_s", (json_int_t)(up > 0 ? up : 0),
				  /* What E2B's SDKs take as E2B_API_URL and E2B_SANDBOX_URL. */
				  "e2b", "api_url", d->e2b_api_url, "sandbox_url", d->cfg.data_url,
				  /* How a sandbox's port is named (docs/design/ports.md). */
				  "ports", "domain", d->cfg.ports_domain, "url_pattern", pattern,
				  /* Scale-out (docs/design/cluster.md): what this process is. */
				  "role", daemon_role_name(d->cfg.role),
				  "store", store_backend(d->store),
				  "node", d->cfg.role == DROLE_NODE ? d->cfg.node_id : NULL));
}

/* An api process sums the nodes' rows, on the store's thread. */
struct info_job {
	int max_sandboxes;
	struct capacity c;
};

static int info_read(struct store *conn, void *arg, space_err *err)
{
	struct info_job *j = arg;

	return capacity_of_nodes(conn, j->max_sandboxes, &j->c, err);
}

static void info_read_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct info_job *j = arg;

	/* The rest of the answer stands without the nodes' rows. */
	if (rc < 0)
		log_warn("cluster capacity: %s", err->msg);
	info_reply(d, req, &j->c);
}

void api_info_get(struct http_req *r)
{
	struct capacity c;
	struct info_job *j;

	if (r->d->cfg.role != DROLE_API) {
		capacity_get(r->d, &c);
		info_reply(r->d, r->req, &c);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	j->max_sandboxes = r->d->cfg.max_sandboxes;
	api_read(r, info_read, info_read_reply, free, j);
}
