/* daemon.h -- the spaced context shared by every daemon component */
#ifndef SPACE_DAEMON_H
#define SPACE_DAEMON_H

#include <event2/event.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>

#include "err.h"
#include "model/model.h"
#include "vmm/vm.h"

#define SPACE_VERSION "0.1.0"

/* What one spaced process does (docs/design/cluster.md). */
enum daemon_role {
	DROLE_ALL,  /* control plane, data plane and VMs in one process (the default) */
	DROLE_API,  /* stateless front end: control plane, routes data-plane traffic to nodes */
	DROLE_NODE, /* runs VMs: registers, renews its lease, claims and reconciles its sandboxes */
};
const char *daemon_role_name(enum daemon_role r);

struct config {
	char listen[128];          /* control plane ADDR:PORT (127.0.0.1:7070) */
	char data_listen[128];     /* data plane ADDR:PORT (127.0.0.1:7071) */
	char state_dir[PATH_MAX];
	char api_key[256];
	char api_key_file[PATH_MAX]; /* --api-key-file / SPACE_API_KEY_FILE, read at start */
	char templates_dir[PATH_MAX]; /* where `make` put the templates */
	char ui_dir[PATH_MAX];     /* the browser page's files (`make ui`; default <bin>/../ui) */
	char accel[8];             /* auto | kvm | tcg */
	int token_ttl_s;           /* data-plane token lifetime (default 900) */
	int tb_size_mib;           /* TCG translation cache per VM (default 24) */
	int net_spares;            /* sandbox netns kept made ahead (default 2, 0: none) */
	int max_sandboxes;         /* VMs at once, pool and builder VMs too (default 64) */
	int default_timeout_s;     /* sandbox lifetime when create names none (default 900) */
	int max_body_bytes;        /* control-plane request bodies (default 1 MiB) */
	int max_stdin_bytes;       /* one data-plane stdin request (default 4 MiB) */
	char data_url[256];        /* base URL handed to clients for the data plane */
	/* Capacity: what running VMs may take together (0 = derived from the
	 * host at start-up: its memory less a reserve, 16 vCPUs per core). */
	int memory_budget_mib;
	int vcpu_budget;
	char pools[512];           /* warm pools at start-up: "base=2,minimal=1" */
	bool ready_snapshots;      /* clone creates from a snapshot of each template (default on) */
	int boot_timeout_s;        /* a VM must answer within this (default 60) */
	/* Clients (0 = derived from the fd limit at start-up, see limits.c). */
	int max_conns;             /* open HTTP connections, both planes */
	int max_conns_per_client;  /* from one client address */
	int request_timeout_s;     /* whole request, headers and body (default 30) */
	/* Body bytes buffered for requests whose credentials are not yet known (http/preauth.c). */
	int unauth_budget_mib;     /* whole daemon (default 64) */
	int unauth_budget_per_client_mib; /* from one client address (default 16) */
	int max_streams;           /* attached output streams, whole daemon */
	int max_streams_per_sandbox;
	/* Bounds on command sessions (docs/design/guest-bounds.md). */
	int context_max_mib;        /* --context-max: a build context's largest size (default 512) */
	char ports_domain[128];     /* --ports-domain: {port}-{id}.<this> reaches a sandbox's port (default localhost) */
	int build_cache_max_mib;    /* --build-cache-max: the builds' layers kept (default 20480; 0: none) */
	int session_output_max_mib; /* output kept per session; older bytes are dropped (default 64) */
	int sandbox_output_max_mib; /* output kept by all sessions of a sandbox (default 256) */
	int output_min_free_mib;   /* free space on the state dir below which output pauses (default 256, 0 = off) */
	int max_sessions_per_sandbox; /* sessions not yet ended, per sandbox (default 64) */
	int max_sessions;          /* sessions not yet ended, in all sandboxes (default 1024) */
	/* Every QEMU jailed (docs/design/jail.md); off only for debugging,
	 * unsafe: --no-jail / SPACE_NO_JAIL=1. */
	bool jail;
	uint32_t jail_uid_base;    /* per-VM uids: base .. base + count - 1 */
	uint32_t jail_uid_count;
	/* Egress gateways (docs/design/egress.md): passed to every space-gw. */
	char dns_upstream[128];    /* --dns-upstream ADDR:PORT ("" = the host's resolv.conf) */
	char egress_ca_file[PATH_MAX]; /* --egress-ca-file: upstream CA bundle ("" = the system's) */
	char egress_refuse[1024];  /* --egress-refuse CIDR[,CIDR...]: no gateway connects there */
	int egress_max_conns;      /* --egress-max-conns: connections per gateway (default 256) */
	int egress_max_buffer_mib; /* --egress-max-buffer: bytes one gateway buffers (default 32 MiB) */
	/* Scale-out (docs/design/cluster.md). */
	char store_url[PATH_MAX + 16]; /* --store sqlite:PATH | postgres://... ("" = sqlite:<state>/space.db) */
	enum daemon_role role;     /* --role api|node|all (default all) */
	char node_id[64];          /* --node-id (default: the host name) */
	char advertise_url[256];   /* --advertise-url: control plane as other processes reach it (default http://<listen>) */
	char advertise_data_url[256]; /* --advertise-data-url: data plane as api processes reach it (default http://<data-listen>) */
	int lease_s;               /* --lease: a node's lease; lost when not renewed within it (default 15) */
	int backstop_ms;           /* --backstop-ms: looks for what no notification announced (default 1000) */
	char shared_dir[PATH_MAX]; /* --shared-dir: suspend and named snapshots, on storage every node mounts ("" = state dir) */
	/* The credential api processes present to nodes (X-Space-Cluster-Key), read from
	 * --cluster-key-file at start; roles api and node need one (docs/design/cluster.md). */
	char cluster_key_file[PATH_MAX];
	char cluster_key[256];
	/* TLS: --tls-cert/--tls-key serve both listeners over TLS (a node's, for its api
	 * processes); --cluster-ca verifies the nodes an api process relays to (https:// URLs),
	 * whose certificates must name --cluster-tls-name (default: the node's id). */
	char tls_cert[PATH_MAX], tls_key[PATH_MAX], cluster_ca[PATH_MAX];
	char cluster_tls_name[256];
	/* Lifecycle events and webhooks (docs/design/events.md). */
	int events_retention_s;    /* --events-retention: events and deliveries kept (default 7 days) */
	int timeout_warning_s;     /* --timeout-warning: a sandbox's timeout_warning this long before (default 60) */
	bool webhooks_allow_loopback; /* --webhooks-allow-loopback: webhook URLs may name loopback */
};

/* Event priorities (libevent): client I/O and everything else at the
 * default; work that can wait a loop turn (starting QEMUs) is bulk, run one
 * callback per turn so that requests keep being served in a burst. */
#define SPACED_PRIOS 3      /* libevent gives new events the middle one */
#define SPACED_PRIO_DEFAULT 1
#define SPACED_PRIO_BULK 2

struct sandbox;
struct session;
struct evhttp;
struct pool;
struct http_conns;
struct sse;
struct envd_watcher;
struct events;
struct webhooks;

struct spaced {
	struct event_base *base;
	struct config cfg;
	/* What E2B's SDKs take as E2B_API_URL for this control plane, made at start by the
	 * listeners (listeners.c: the E2B front end knows its shape) for any front end to show. */
	char e2b_api_url[160];
	struct store *store;
	struct net_spares *net_spares; /* netns made ahead (net/spares.c; NULL: none) */
	struct event *store_ev;    /* the store's thread says reads queued on it are done */
	enum accel accel;
	char accel_reason[256];
	struct evhttp *api_http;
	struct evhttp *data_http;
	struct sandbox *sandboxes; /* runtime objects of sandboxes not deleted */
	char state_tag[17];        /* short hash of state_dir: names sock/mem dirs */
	char cgroup_scope[32];     /* "space-<tag>": VMs' cgroup leaves go under it */
	int64_t started_ms;
	struct event *tick;        /* periodic: expiry, pools, ready snapshots, disk GC */
	struct op_waiter *op_waiters; /* long-polls on operations (ops.c) */
	struct op_unsaved *op_unsaved; /* operations whose last write failed: retried (ops.c) */
	struct token_mem_table *tokens; /* data-plane tokens known to this process (tokens.c) */
	struct pool *pools;        /* warm pools by template name (pool.c) */
	struct build *builds;      /* template builds, newest first (build/build.c) */
	struct http_conns *conns;  /* every client connection (http/conn.c) */
	struct sse *streams;       /* attached output streams (dp_attach.c) */
	unsigned nstreams;
	struct envd_watcher *envd_watchers; /* E2B's polled filesystem watchers (e2b/envd_watch.c) */
	int memory_budget_mib, vcpu_budget; /* effective capacity (capacity.c) */
	int64_t reconciled_ms;     /* node: when its rows were last reconciled (cluster/node.c) */
	char *secrets_sig;         /* node: the secrets as last seen ("name@updated_ms" lines) */
	unsigned captures_begun;   /* captures started so far (disks_gc's check) */
	bool reconciling;          /* node: a reconcile's read is queued on the store's thread */
	struct reaped {            /* the sandboxes let go of last (sandbox_reaped_since) */
		char id[ID_LEN];
		int64_t ms;
	} reaped[256];
	unsigned reaped_next;
	struct cluster_worker *worker; /* api, node: the cluster's database work, off the loop (cluster/worker.h) */
	struct cluster_push *push;     /* api, node: notifications from the store (cluster/push.c) */
	/* While a control-plane handler runs: the record of the sandbox its request names, read
	 * on the store's thread because this process does not hold it (api.c; sandbox_get). */
	const struct sandbox_pre *sb_pre;
	/* TLS (http/tls.h): the listeners' server context (--tls-cert), and an api process's
	 * client context for https:// nodes (--cluster-ca); NULL when not configured. */
	struct ssl_ctx_st *tls_server, *tls_client;
	struct events *events;     /* lifecycle events (events/events.h) */
	struct webhooks *webhooks; /* ... and where they are POSTed (events/webhook.h) */
};

/* config.c: defaults, then environment (SPACE_*), then flags. Exits on bad flags. */
void config_load(struct config *cfg, int argc, char **argv);
/* Reads cfg->api_key_file into cfg->api_key when one is named. The file must
 * be a regular file of ours (or root's) that group and others cannot read or
 * write; anything else is refused with a message saying why. */
int config_read_key_file(struct config *cfg, space_err *err);
/* The cluster's credential (--cluster-key-file), for roles api and node: required there. */
int config_read_cluster_key(struct config *cfg, space_err *err);

/* limits.c: raises RLIMIT_NOFILE's soft limit to the hard one and sizes the
 * client caps left at 0 from what it got. Returns the fd limit. */
unsigned limits_init(struct config *cfg);

/* paths.c: where things live. */
void path_run_dir(const struct spaced *d, const char *sb_id, char out[PATH_MAX]);
void path_sock_dir(const struct spaced *d, const char *sb_id, char out[PATH_MAX]);
void path_console_log(const struct spaced *d, const char *sb_id, char out[PATH_MAX]);
void path_session_spool(const struct spaced *d, const char *sb_id, const char *ss_id, char out[PATH_MAX]);
/* Disk layers (qcow2) of every sandbox and snapshot: <state>/disks. */
void path_disks_dir(const struct spaced *d, char out[PATH_MAX]);
/* A snapshot's directory: on tmpfs for what is rebuilt or short-lived
 * (ready and fork snapshots), under the state directory for what must
 * outlive a host reboot (named and suspend snapshots). */
void path_snapshot_dir(const struct spaced *d, enum snap_kind kind, const char *sn_id, char out[PATH_MAX]);
void path_tmpfs_root(const struct spaced *d, char out[PATH_MAX]);
/* Jail roots of VMs: /run/space/<tag>/jail, and .../<sb_id> for one. */
void path_jail_root(const struct spaced *d, char out[PATH_MAX]);
void path_jail_dir(const struct spaced *d, const char *sb_id, char out[PATH_MAX]);
/* mkdir -p whose new directories are 0700; the last one must end up a
 * directory of ours that nobody else can enter (EACCES otherwise). */
int path_mkdirs(const char *path, space_err *err);

/* templates.c: import what `make` built (templates_dir/<name>/template.json). */
int templates_import(struct spaced *d, space_err *err);
/* One template directory (vmlinuz, rootfs.ext4, template.json, digest) checked, verified and
 * recorded with conn (any thread's connection: a build's result is imported on the store's);
 * digest (may be NULL) gets its digest. */
struct store;
int template_import_dir(struct store *conn, const char *state_dir, const char *src, char digest[80],
			space_err *err);
/* The sha256 of the file at path, as a build computed it, remembered on the file (its xattr)
 * so that the import does not hash it again. */
int template_remember_hash(const char *path, const char hex[65], space_err *err);

/* api.c / dataplane.c: the two HTTP listeners. */

#endif
