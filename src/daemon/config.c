/* config.c -- spaced settings: defaults, then SPACE_* environment variables, then flags */
#include <ctype.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "egress/policy.h"
#include "keyfile.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: spaced [options]\n"
		"  --listen ADDR:PORT        control plane (SPACE_LISTEN, default 127.0.0.1:7070)\n"
		"  --data-listen ADDR:PORT   data plane (SPACE_DATA_LISTEN, default 127.0.0.1:7071)\n"
		"  --data-url URL            data-plane URL handed to clients (default http://<data-listen>)\n"
		"  --events-retention S      lifecycle events and webhook deliveries are kept S seconds (default 604800)\n"
		"  --timeout-warning S       a sandbox's timeout_warning event comes S seconds before it times out\n"
		"                            (default 60)\n"
		"  --webhooks-allow-loopback webhook URLs may name loopback (tests, single-machine use); link-local\n"
		"                            and private ranges stay refused\n"
		"  --ports-domain DOMAIN     a sandbox's TCP port is {port}-{id}.DOMAIN on the data plane (default\n"
		"                            localhost: every *.localhost name is loopback, no DNS needed)\n"
		"  --state-dir DIR           state directory (SPACE_STATE_DIR, default /var/lib/space)\n"
		"  --api-key KEY             control-plane API key (SPACE_API_KEY; visible to every user in ps: prefer\n"
		"                            --api-key-file; default: generated once, kept in the state dir)\n"
		"  --api-key-file PATH       read the API key from PATH (SPACE_API_KEY_FILE; mode 600, ours or root's)\n"
		"  --templates-dir DIR       templates built by make (SPACE_TEMPLATES_DIR, default <bin>/../templates)\n"
		"  --ui-dir DIR              the browser page served at /ui/, built by make ui (SPACE_UI_DIR,\n"
		"                            default <bin>/../ui)\n"
		"  --accel auto|kvm|tcg      accelerator (SPACE_ACCEL, default auto: KVM if a probe boot works)\n"
		"  --token-ttl SECONDS       data-plane token lifetime (SPACE_TOKEN_TTL, default 900)\n"
		"  --tb-size MIB             TCG translation cache per VM (default 24)\n"
		"  --max-sandboxes N         sandboxes running at once (SPACE_MAX_SANDBOXES, default 64)\n"
		"  --default-timeout SECONDS sandbox lifetime when create names none (default 900, 0 = none)\n"
		"  --memory-budget MIB       memory all VMs may take together (SPACE_MEMORY_BUDGET; default: host less 1 GiB)\n"
		"  --vcpu-budget N           vCPUs all VMs may have together (SPACE_VCPU_BUDGET; default: 16 per core)\n"
		"  --pool NAME=N[,NAME=N]    warm pools to keep (SPACE_POOL; sizes also set with PUT /v1/templates/{ref}/pool)\n"
		"  --no-ready-snapshots      always boot; never clone creates from template snapshots\n"
		"  --boot-timeout SECONDS    a VM's guest must answer within this (default 60)\n"
		"  --max-connections N       open HTTP connections, both planes (SPACE_MAX_CONNECTIONS; default from the fd limit)\n"
		"  --max-connections-per-client N  from one client address (default: half of --max-connections)\n"
		"  --request-timeout SECONDS a whole request (headers and body) must arrive within this (default 30)\n"
		"  --unauth-body-budget MIB  request body bytes buffered at once for clients whose credentials are not\n"
		"                            yet checked (a token to read from the store), whole daemon (default 64)\n"
		"  --unauth-body-budget-per-client MIB  the same, from one client address (default 16)\n"
		"  --max-streams N           attached output streams in all (SPACE_MAX_STREAMS; default: half the connections)\n"
		"  --max-streams-per-sandbox N  attached output streams per sandbox (default 32)\n"
		"  --session-output-max MIB  output kept per session, older bytes dropped (default 64)\n"
		"  --context-max MIB   the largest build context PUT /v1/contexts takes (default 512)\n"
		"  --build-cache-max MIB  the builds' cached layers kept, oldest deleted past it (default 20480)\n"
		"  --sandbox-output-max MIB  output kept by all sessions of a sandbox (default 256)\n"
		"  --output-min-free MIB     free space on the state dir below which output pauses (default 256, 0 = off)\n"
		"  --max-sessions-per-sandbox N  sessions not yet ended per sandbox (default 64)\n"
		"  --max-sessions N          sessions not yet ended in all sandboxes (default 1024)\n"
		"  --jail-uid-base UID       first of the per-VM uids QEMUs run as (SPACE_JAIL_UID_BASE, default 2000000000)\n"
		"  --jail-uid-count N        how many such uids; the KVM probe runs as the next one (SPACE_JAIL_UID_COUNT, default 65536)\n"
		"  --no-jail                 UNSAFE, for debugging only: QEMU runs as root with the daemon's\n"
		"                            environment, no mount namespace, no seccomp (SPACE_NO_JAIL=1)\n"
		"  --dns-upstream ADDR:PORT  the DNS server sandbox gateways resolve allowed names with\n"
		"                            (SPACE_DNS_UPSTREAM; default: the host's /etc/resolv.conf)\n"
		"  --egress-ca-file FILE     CA bundle gateways verify upstream TLS against (they intercept\n"
		"                            TLS by default; SPACE_EGRESS_CA_FILE; default: the system bundle)\n"
		"  --egress-refuse CIDR[,CIDR...]  addresses no gateway connects to whatever a policy allows,\n"
		"                            e.g. a cluster's pod and service ranges (SPACE_EGRESS_REFUSE; default none)\n"
		"  --egress-max-conns N      guest connections one sandbox's gateway holds at once (default 256)\n"
		"  --egress-max-buffer MIB   bytes one gateway buffers for all its connections; past it reading\n"
		"                            stops and new connections are refused (default 32)\n"
		"  --net-spares N            sandbox network namespaces kept made ahead, so that a start takes\n"
		"                            one instead of making it (default 2; 0: none)\n"
		"  --store URL               where state lives (SPACE_STORE): sqlite:PATH (default sqlite:<state-dir>/space.db)\n"
		"                            or postgres://USER@HOST:PORT/DB (a cluster's shared desired state)\n"
		"  --role all|api|node       what this process does (SPACE_ROLE, default all: everything in one;\n"
		"                            api: stateless control plane and data-plane router; node: runs VMs)\n"
		"  --node-id ID              this node's name in the cluster (SPACE_NODE_ID, default: the host name)\n"
		"  --advertise-url URL       control plane as api processes reach this node (default http://<listen>)\n"
		"  --advertise-data-url URL  data plane as api processes reach this node (default http://<data-listen>)\n"
		"  --lease SECONDS           a node's lease; its sandboxes are marked lost when it lapses (default 15)\n"
		"  --backstop-ms MS          how often a node looks for intents, and an api process for results, that\n"
		"                            no notification announced (both are pushed; default 1000)\n"
		"  --shared-dir DIR          suspend and named snapshots, on storage every node mounts (SPACE_SHARED_DIR,\n"
		"                            default: the state dir)\n"
		"  --cluster-key-file PATH   the credential api processes present to nodes, which refuse any other\n"
		"                            caller (SPACE_CLUSTER_KEY_FILE; mode 600; or the key itself in\n"
		"                            SPACE_CLUSTER_KEY; required for --role api|node)\n"
		"  --tls-cert FILE --tls-key FILE  serve both listeners over TLS (PEM; a node's, for its api processes)\n"
		"  --cluster-ca FILE         an api process verifies the nodes it relays to (https:// advertise URLs)\n"
		"                            against this CA bundle (SPACE_CLUSTER_CA)\n"
		"  --cluster-tls-name NAME   the name a node's certificate must carry (default: the node's id)\n"
		"  --version, --help\n");
}

const char *daemon_role_name(enum daemon_role r)
{
	switch (r) {
	case DROLE_API: return "api";
	case DROLE_NODE: return "node";
	default: return "all";
	}
}

/* A DNS name: labels of letters, digits and '-', lowercased. */
static void set_ports_domain(struct config *cfg, const char *v)
{
	size_t n = strlen(v), label = 0;

	if (n == 0 || n >= sizeof(cfg->ports_domain) || v[0] == '.' || v[n - 1] == '.') {
		fprintf(stderr, "spaced: --ports-domain must be a DNS name such as localhost or preview.example.com\n");
		exit(2);
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)v[i];

		label = c == '.' ? 0 : label + 1;
		if (!(isalnum(c) || c == '-' || (c == '.' && v[i + 1] != '.')) || label > 63) {
			fprintf(stderr, "spaced: --ports-domain '%s' is not a DNS name\n", v);
			exit(2);
		}
		cfg->ports_domain[i] = (char)tolower(c);
	}
	cfg->ports_domain[n] = '\0';
}

static enum daemon_role parse_role(const char *v, const char *what)
{
	if (!strcmp(v, "all"))
		return DROLE_ALL;
	if (!strcmp(v, "api"))
		return DROLE_API;
	if (!strcmp(v, "node"))
		return DROLE_NODE;
	fprintf(stderr, "spaced: %s must be all, api or node\n", what);
	exit(2);
}

static void set_str(char *dst, size_t len, const char *v, const char *what)
{
	if (strlen(v) >= len) {
		fprintf(stderr, "spaced: %s too long\n", what);
		exit(2);
	}
	snprintf(dst, len, "%s", v);
}

static int parse_int(const char *v, const char *what, long lo, long hi)
{
	char *end;
	long n = strtol(v, &end, 10);

	if (!*v || *end || n < lo || n > hi) {
		fprintf(stderr, "spaced: %s must be an integer from %ld to %ld\n", what, lo, hi);
		exit(2);
	}
	return (int)n;
}

static bool valid_node_id(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') || id[i] == '.' ||
		      id[i] == '-'))
			return false;
	return true;
}

/* <directory of the spaced binary>/../<name> (build/<name> for build/bin/spaced). */
static void default_beside_bin(char dst[PATH_MAX], const char *name)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0) {
		snprintf(dst, PATH_MAX, "build/%s", name);
		return;
	}
	exe[n] = '\0';
	snprintf(dst, PATH_MAX, "%s/../%s", dirname(exe), name);
}

/* A variable that carries a secret, once read: wiped where it lies (the process's initial
 * environment block is what /proc/PID/environ shows, also after unsetenv) and removed, so that
 * nothing the daemon starts inherits it. */
static void forget_env(const char *name)
{
	char *v = getenv(name);

	if (!v)
		return;
	explicit_bzero(v, strlen(v));
	unsetenv(name);
}

/* Checked here with the gateways' own parser, so that a bad list stops spaced at start
 * rather than every gateway later. */
static void set_egress_refuse(struct config *cfg, const char *v, const char *what)
{
	struct egress_cidrs *l = malloc(sizeof(*l));
	space_err err = { 0 };

	set_str(cfg->egress_refuse, sizeof(cfg->egress_refuse), v, what);
	if (!l || egress_cidrs_parse(v, l, &err) < 0) {
		fprintf(stderr, "spaced: %s: %s\n", what, l ? err.msg : "out of memory");
		exit(2);
	}
	free(l);
}

static void from_env(struct config *cfg)
{
	const char *v;

	if ((v = getenv("SPACE_LISTEN")) && *v)
		set_str(cfg->listen, sizeof(cfg->listen), v, "SPACE_LISTEN");
	if ((v = getenv("SPACE_DATA_LISTEN")) && *v)
		set_str(cfg->data_listen, sizeof(cfg->data_listen), v, "SPACE_DATA_LISTEN");
	if ((v = getenv("SPACE_STATE_DIR")) && *v)
		set_str(cfg->state_dir, sizeof(cfg->state_dir), v, "SPACE_STATE_DIR");
	if ((v = getenv("SPACE_API_KEY")) && *v)
		set_str(cfg->api_key, sizeof(cfg->api_key), v, "SPACE_API_KEY");
	if ((v = getenv("SPACE_API_KEY_FILE")) && *v) {
		if (cfg->api_key[0]) {
			fprintf(stderr, "spaced: set SPACE_API_KEY or SPACE_API_KEY_FILE, not both\n");
			exit(2);
		}
		set_str(cfg->api_key_file, sizeof(cfg->api_key_file), v, "SPACE_API_KEY_FILE");
	}
	if ((v = getenv("SPACE_MAX_CONNECTIONS")) && *v)
		cfg->max_conns = parse_int(v, "SPACE_MAX_CONNECTIONS", 1, 1 << 20);
	if ((v = getenv("SPACE_REQUEST_TIMEOUT")) && *v)
		cfg->request_timeout_s = parse_int(v, "SPACE_REQUEST_TIMEOUT", 1, 3600);
	if ((v = getenv("SPACE_MAX_STREAMS")) && *v)
		cfg->max_streams = parse_int(v, "SPACE_MAX_STREAMS", 1, 1 << 20);
	if ((v = getenv("SPACE_TEMPLATES_DIR")) && *v)
		set_str(cfg->templates_dir, sizeof(cfg->templates_dir), v, "SPACE_TEMPLATES_DIR");
	if ((v = getenv("SPACE_UI_DIR")) && *v)
		set_str(cfg->ui_dir, sizeof(cfg->ui_dir), v, "SPACE_UI_DIR");
	if ((v = getenv("SPACE_ACCEL")) && *v)
		set_str(cfg->accel, sizeof(cfg->accel), v, "SPACE_ACCEL");
	if ((v = getenv("SPACE_TOKEN_TTL")) && *v)
		cfg->token_ttl_s = parse_int(v, "SPACE_TOKEN_TTL", 1, 86400);
	if ((v = getenv("SPACE_MAX_SANDBOXES")) && *v)
		cfg->max_sandboxes = parse_int(v, "SPACE_MAX_SANDBOXES", 1, 100000);
	if ((v = getenv("SPACE_MEMORY_BUDGET")) && *v)
		cfg->memory_budget_mib = parse_int(v, "SPACE_MEMORY_BUDGET", 64, 1 << 30);
	if ((v = getenv("SPACE_VCPU_BUDGET")) && *v)
		cfg->vcpu_budget = parse_int(v, "SPACE_VCPU_BUDGET", 1, 1 << 20);
	if ((v = getenv("SPACE_NO_JAIL")) && *v && strcmp(v, "0") != 0)
		cfg->jail = false;
	if ((v = getenv("SPACE_JAIL_UID_BASE")) && *v)
		cfg->jail_uid_base = (uint32_t)parse_int(v, "SPACE_JAIL_UID_BASE", 1000, 2100000000);
	if ((v = getenv("SPACE_JAIL_UID_COUNT")) && *v)
		cfg->jail_uid_count = (uint32_t)parse_int(v, "SPACE_JAIL_UID_COUNT", 1, 1 << 24);
	if ((v = getenv("SPACE_DNS_UPSTREAM")) && *v)
		set_str(cfg->dns_upstream, sizeof(cfg->dns_upstream), v, "SPACE_DNS_UPSTREAM");
	if ((v = getenv("SPACE_EGRESS_CA_FILE")) && *v)
		set_str(cfg->egress_ca_file, sizeof(cfg->egress_ca_file), v, "SPACE_EGRESS_CA_FILE");
	if ((v = getenv("SPACE_EGRESS_REFUSE")) && *v)
		set_egress_refuse(cfg, v, "SPACE_EGRESS_REFUSE");
	if ((v = getenv("SPACE_POOL")) && *v)
		set_str(cfg->pools, sizeof(cfg->pools), v, "SPACE_POOL");
	if ((v = getenv("SPACE_STORE")) && *v)
		set_str(cfg->store_url, sizeof(cfg->store_url), v, "SPACE_STORE");
	if ((v = getenv("SPACE_ROLE")) && *v)
		cfg->role = parse_role(v, "SPACE_ROLE");
	if ((v = getenv("SPACE_NODE_ID")) && *v)
		set_str(cfg->node_id, sizeof(cfg->node_id), v, "SPACE_NODE_ID");
	if ((v = getenv("SPACE_SHARED_DIR")) && *v)
		set_str(cfg->shared_dir, sizeof(cfg->shared_dir), v, "SPACE_SHARED_DIR");
	if ((v = getenv("SPACE_CLUSTER_KEY")) && *v)
		set_str(cfg->cluster_key, sizeof(cfg->cluster_key), v, "SPACE_CLUSTER_KEY");
	if ((v = getenv("SPACE_CLUSTER_KEY_FILE")) && *v)
		set_str(cfg->cluster_key_file, sizeof(cfg->cluster_key_file), v, "SPACE_CLUSTER_KEY_FILE");
	if ((v = getenv("SPACE_CLUSTER_CA")) && *v)
		set_str(cfg->cluster_ca, sizeof(cfg->cluster_ca), v, "SPACE_CLUSTER_CA");
	/* the key, and a store URL that may hold a password */
	forget_env("SPACE_API_KEY");
	forget_env("SPACE_STORE");
	forget_env("SPACE_CLUSTER_KEY");
}

void config_load(struct config *cfg, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "data-listen", required_argument, NULL, 'd' },
		{ "data-url", required_argument, NULL, 'u' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "api-key", required_argument, NULL, 'k' },
		{ "templates-dir", required_argument, NULL, 't' },
		{ "accel", required_argument, NULL, 'a' },
		{ "token-ttl", required_argument, NULL, 'T' },
		{ "tb-size", required_argument, NULL, 'b' },
		{ "max-sandboxes", required_argument, NULL, 'm' },
		{ "default-timeout", required_argument, NULL, 'o' },
		{ "memory-budget", required_argument, NULL, 'M' },
		{ "vcpu-budget", required_argument, NULL, 'C' },
		{ "pool", required_argument, NULL, 'p' },
		{ "no-ready-snapshots", no_argument, NULL, 'R' },
		{ "boot-timeout", required_argument, NULL, 'B' },
		{ "api-key-file", required_argument, NULL, 'K' },
		{ "max-connections", required_argument, NULL, 'x' },
		{ "max-connections-per-client", required_argument, NULL, 'X' },
		{ "request-timeout", required_argument, NULL, 'r' },
		{ "max-streams", required_argument, NULL, 'S' },
		{ "max-streams-per-sandbox", required_argument, NULL, 'P' },
		{ "session-output-max", required_argument, NULL, 1001 },
		{ "context-max", required_argument, NULL, 1021 },
		{ "build-cache-max", required_argument, NULL, 1022 },
		{ "sandbox-output-max", required_argument, NULL, 1002 },
		{ "output-min-free", required_argument, NULL, 1003 },
		{ "max-sessions-per-sandbox", required_argument, NULL, 1004 },
		{ "max-sessions", required_argument, NULL, 1005 },
		{ "no-jail", no_argument, NULL, 'J' },
		{ "jail-uid-base", required_argument, NULL, 'U' },
		{ "jail-uid-count", required_argument, NULL, 'N' },
		{ "dns-upstream", required_argument, NULL, 1006 },
		{ "egress-ca-file", required_argument, NULL, 1007 },
		{ "ui-dir", required_argument, NULL, 1008 },
		{ "store", required_argument, NULL, 1009 },
		{ "role", required_argument, NULL, 1010 },
		{ "node-id", required_argument, NULL, 1011 },
		{ "advertise-url", required_argument, NULL, 1012 },
		{ "advertise-data-url", required_argument, NULL, 1013 },
		{ "lease", required_argument, NULL, 1014 },
		{ "shared-dir", required_argument, NULL, 1015 },
		{ "unauth-body-budget", required_argument, NULL, 1100 },
		{ "cluster-key-file", required_argument, NULL, 1102 },
		{ "tls-cert", required_argument, NULL, 1103 },
		{ "tls-key", required_argument, NULL, 1104 },
		{ "cluster-ca", required_argument, NULL, 1105 },
		{ "cluster-tls-name", required_argument, NULL, 1106 },
		{ "unauth-body-budget-per-client", required_argument, NULL, 1101 },
		{ "egress-refuse", required_argument, NULL, 1016 },
		{ "egress-max-conns", required_argument, NULL, 1017 },
		{ "egress-max-buffer", required_argument, NULL, 1018 },
		{ "net-spares", required_argument, NULL, 1019 },
		{ "backstop-ms", required_argument, NULL, 1020 },
		{ "ports-domain", required_argument, NULL, 1023 },
		{ "events-retention", required_argument, NULL, 1030 },
		{ "timeout-warning", required_argument, NULL, 1031 },
		{ "webhooks-allow-loopback", no_argument, NULL, 1032 },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->listen, sizeof(cfg->listen), "127.0.0.1:7070");
	snprintf(cfg->data_listen, sizeof(cfg->data_listen), "127.0.0.1:7071");
	snprintf(cfg->state_dir, sizeof(cfg->state_dir), "/var/lib/space");
	snprintf(cfg->accel, sizeof(cfg->accel), "auto");
	default_beside_bin(cfg->templates_dir, "templates");
	default_beside_bin(cfg->ui_dir, "ui");
	cfg->token_ttl_s = 900;
	cfg->tb_size_mib = 24;
	cfg->net_spares = 2;
	cfg->max_sandboxes = 64;
	cfg->default_timeout_s = 900;
	cfg->max_body_bytes = 1 << 20;
	cfg->max_stdin_bytes = 4 << 20;
	cfg->ready_snapshots = true;
	cfg->boot_timeout_s = 60;
	cfg->request_timeout_s = 30;
	cfg->unauth_budget_mib = 64;
	cfg->unauth_budget_per_client_mib = 16;
	cfg->max_streams_per_sandbox = 32;
	cfg->session_output_max_mib = 64;
	cfg->context_max_mib = 512;
	cfg->build_cache_max_mib = 20480;
	snprintf(cfg->ports_domain, sizeof(cfg->ports_domain), "localhost");
	cfg->sandbox_output_max_mib = 256;
	cfg->output_min_free_mib = 256;
	cfg->max_sessions_per_sandbox = 64;
	cfg->max_sessions = 1024;
	cfg->jail = true;
	cfg->jail_uid_base = 2000000000u;
	cfg->jail_uid_count = 65536;
	cfg->lease_s = 15;
	cfg->backstop_ms = 1000;
	cfg->egress_max_conns = 256;
	cfg->egress_max_buffer_mib = 32;
	cfg->events_retention_s = 7 * 86400;
	cfg->timeout_warning_s = 60;
	from_env(cfg);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'l': set_str(cfg->listen, sizeof(cfg->listen), optarg, "--listen"); break;
		case 'd': set_str(cfg->data_listen, sizeof(cfg->data_listen), optarg, "--data-listen"); break;
		case 'u': set_str(cfg->data_url, sizeof(cfg->data_url), optarg, "--data-url"); break;
		case 's': set_str(cfg->state_dir, sizeof(cfg->state_dir), optarg, "--state-dir"); break;
		case 'k':
			set_str(cfg->api_key, sizeof(cfg->api_key), optarg, "--api-key");
			cfg->api_key_file[0] = '\0'; /* a flag overrides the environment */
			break;
		case 'K':
			set_str(cfg->api_key_file, sizeof(cfg->api_key_file), optarg, "--api-key-file");
			cfg->api_key[0] = '\0';
			break;
		case 'x': cfg->max_conns = parse_int(optarg, "--max-connections", 1, 1 << 20); break;
		case 'X': cfg->max_conns_per_client = parse_int(optarg, "--max-connections-per-client", 1, 1 << 20); break;
		case 'r': cfg->request_timeout_s = parse_int(optarg, "--request-timeout", 1, 3600); break;
		case 'S': cfg->max_streams = parse_int(optarg, "--max-streams", 1, 1 << 20); break;
		case 'P': cfg->max_streams_per_sandbox = parse_int(optarg, "--max-streams-per-sandbox", 1, 1 << 20); break;
		case 't': set_str(cfg->templates_dir, sizeof(cfg->templates_dir), optarg, "--templates-dir"); break;
		case 'a': set_str(cfg->accel, sizeof(cfg->accel), optarg, "--accel"); break;
		case 'T': cfg->token_ttl_s = parse_int(optarg, "--token-ttl", 1, 86400); break;
		case 'b': cfg->tb_size_mib = parse_int(optarg, "--tb-size", 1, 4096); break;
		case 'm': cfg->max_sandboxes = parse_int(optarg, "--max-sandboxes", 1, 100000); break;
		case 'o': cfg->default_timeout_s = parse_int(optarg, "--default-timeout", 0, 604800); break;
		case 'M': cfg->memory_budget_mib = parse_int(optarg, "--memory-budget", 64, 1 << 30); break;
		case 'C': cfg->vcpu_budget = parse_int(optarg, "--vcpu-budget", 1, 1 << 20); break;
		case 'p': set_str(cfg->pools, sizeof(cfg->pools), optarg, "--pool"); break;
		case 'R': cfg->ready_snapshots = false; break;
		case 'B': cfg->boot_timeout_s = parse_int(optarg, "--boot-timeout", 5, 3600); break;
		case 1001: cfg->session_output_max_mib = parse_int(optarg, "--session-output-max", 1, 1 << 20); break;
		case 1002: cfg->sandbox_output_max_mib = parse_int(optarg, "--sandbox-output-max", 1, 1 << 24); break;
		case 1003: cfg->output_min_free_mib = parse_int(optarg, "--output-min-free", 0, 1 << 30); break;
		case 1004: cfg->max_sessions_per_sandbox = parse_int(optarg, "--max-sessions-per-sandbox", 1, 100000); break;
		case 1005: cfg->max_sessions = parse_int(optarg, "--max-sessions", 1, 1000000); break;
		case 1006: set_str(cfg->dns_upstream, sizeof(cfg->dns_upstream), optarg, "--dns-upstream"); break;
		case 1007: set_str(cfg->egress_ca_file, sizeof(cfg->egress_ca_file), optarg, "--egress-ca-file"); break;
		case 1008: set_str(cfg->ui_dir, sizeof(cfg->ui_dir), optarg, "--ui-dir"); break;
		case 1009: set_str(cfg->store_url, sizeof(cfg->store_url), optarg, "--store"); break;
		case 1010: cfg->role = parse_role(optarg, "--role"); break;
		case 1011: set_str(cfg->node_id, sizeof(cfg->node_id), optarg, "--node-id"); break;
		case 1012: set_str(cfg->advertise_url, sizeof(cfg->advertise_url), optarg, "--advertise-url"); break;
		case 1013:
			set_str(cfg->advertise_data_url, sizeof(cfg->advertise_data_url), optarg, "--advertise-data-url");
			break;
		case 1014: cfg->lease_s = parse_int(optarg, "--lease", 2, 3600); break;
		case 1015: set_str(cfg->shared_dir, sizeof(cfg->shared_dir), optarg, "--shared-dir"); break;
		case 1100: cfg->unauth_budget_mib = parse_int(optarg, "--unauth-body-budget", 1, 1 << 20); break;
		case 1101:
			cfg->unauth_budget_per_client_mib = parse_int(optarg, "--unauth-body-budget-per-client", 1, 1 << 20);
			break;
		case 1102:
			set_str(cfg->cluster_key_file, sizeof(cfg->cluster_key_file), optarg, "--cluster-key-file");
			break;
		case 1103: set_str(cfg->tls_cert, sizeof(cfg->tls_cert), optarg, "--tls-cert"); break;
		case 1104: set_str(cfg->tls_key, sizeof(cfg->tls_key), optarg, "--tls-key"); break;
		case 1105: set_str(cfg->cluster_ca, sizeof(cfg->cluster_ca), optarg, "--cluster-ca"); break;
		case 1106:
			set_str(cfg->cluster_tls_name, sizeof(cfg->cluster_tls_name), optarg, "--cluster-tls-name");
			break;
		case 1016: set_egress_refuse(cfg, optarg, "--egress-refuse"); break;
		case 1017: cfg->egress_max_conns = parse_int(optarg, "--egress-max-conns", 1, 65536); break;
		case 1018: cfg->egress_max_buffer_mib = parse_int(optarg, "--egress-max-buffer", 1, 65536); break;
		case 1019: cfg->net_spares = parse_int(optarg, "--net-spares", 0, 64); break;
		case 1020: cfg->backstop_ms = parse_int(optarg, "--backstop-ms", 100, 600000); break;
		case 1021: cfg->context_max_mib = parse_int(optarg, "--context-max", 1, 1 << 20); break;
		case 1023: set_ports_domain(cfg, optarg); break;
		case 1030: cfg->events_retention_s = parse_int(optarg, "--events-retention", 60, 365 * 86400); break;
		case 1031: cfg->timeout_warning_s = parse_int(optarg, "--timeout-warning", 0, 86400); break;
		case 1032: cfg->webhooks_allow_loopback = true; break;
		case 1022: cfg->build_cache_max_mib = parse_int(optarg, "--build-cache-max", 0, 1 << 30); break;
		case 'J': cfg->jail = false; break;
		case 'U': cfg->jail_uid_base = (uint32_t)parse_int(optarg, "--jail-uid-base", 1000, 2100000000); break;
		case 'N': cfg->jail_uid_count = (uint32_t)parse_int(optarg, "--jail-uid-count", 1, 1 << 24); break;
		case 'V': printf("spaced %s\n", SPACE_VERSION); exit(0);
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "spaced: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		exit(2);
	}
	if (strcmp(cfg->accel, "auto") && strcmp(cfg->accel, "kvm") && strcmp(cfg->accel, "tcg")) {
		fprintf(stderr, "spaced: --accel must be auto, kvm or tcg\n");
		exit(2);
	}
	if (cfg->api_key[0] && cfg->api_key_file[0]) {
		fprintf(stderr, "spaced: give --api-key or --api-key-file, not both\n");
		exit(2);
	}
	if (!cfg->data_url[0])
		snprintf(cfg->data_url, sizeof(cfg->data_url), "http://%s", cfg->data_listen);
	if (!cfg->advertise_url[0])
		snprintf(cfg->advertise_url, sizeof(cfg->advertise_url), "http://%s", cfg->listen);
	if (!cfg->advertise_data_url[0])
		snprintf(cfg->advertise_data_url, sizeof(cfg->advertise_data_url), "http://%s", cfg->data_listen);
	if (!cfg->tls_cert[0] != !cfg->tls_key[0]) {
		fprintf(stderr, "spaced: give --tls-cert and --tls-key together\n");
		exit(2);
	}
	if (!cfg->node_id[0] && gethostname(cfg->node_id, sizeof(cfg->node_id) - 1) < 0)
		snprintf(cfg->node_id, sizeof(cfg->node_id), "node");
	for (char *p = cfg->node_id; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (!valid_node_id(cfg->node_id)) {
		fprintf(stderr, "spaced: --node-id must be 1..63 of [a-z0-9.-] (a host name)\n");
		exit(2);
	}
}

int config_read_key_file(struct config *cfg, space_err *err)
{
	if (!cfg->api_key_file[0])
		return 0;
	if (keyfile_read(cfg->api_key_file, cfg->api_key, sizeof(cfg->api_key), err) < 0)
		return err_wrap(err, "--api-key-file");
	return 0;
}

int config_read_cluster_key(struct config *cfg, space_err *err)
{
	if (cfg->role == DROLE_ALL)
		return 0;
	if (cfg->cluster_key[0] && cfg->cluster_key_file[0])
		return err_set(err, EINVAL, "give SPACE_CLUSTER_KEY or --cluster-key-file, not both");
	if (!cfg->cluster_key[0] && !cfg->cluster_key_file[0])
		return err_set(err, EINVAL, "--role %s needs --cluster-key-file (or SPACE_CLUSTER_KEY): the credential "
					    "api processes present to nodes (a node refuses every other caller)",
			       daemon_role_name(cfg->role));
	if (cfg->cluster_key_file[0] &&
	    keyfile_read(cfg->cluster_key_file, cfg->cluster_key, sizeof(cfg->cluster_key), err) < 0)
		return err_wrap(err, "--cluster-key-file");
	if (strlen(cfg->cluster_key) < 16)
		return err_set(err, EINVAL, "--cluster-key-file: the key must be at least 16 characters");
	return 0;
}
