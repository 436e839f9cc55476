/* main.c -- spaced: start-up, the event loop, and shutdown (VMs are left running) */
#include <event2/event.h>
#include <fcntl.h>
#include <malloc.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "build/build.h"
#include "cleanup.h"
#include "cluster/cluster.h"
#include "front/port_names.h"
#include "listeners.h"
#include "http/http.h"
#include "http/tls.h"
#include "keyfile.h"
#include "net/net.h"
#include "e2b/e2b.h"
#include "events/events.h"
#include "events/webhook.h"
#include "log.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "vmm/memimg.h"
#include "vmm/proc.h"

#define QEMU_BIN "/usr/bin/qemu-system-x86_64"
#define PROBE_TIMEOUT_MS 8000

static int mkdir_p(const char *path, mode_t mode)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(tmp, mode) < 0 && errno != EEXIST ? -1 : 0;
}

static void hex(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

static int prepare_state_dir(struct spaced *d, space_err *err)
{
	char real[PATH_MAX], lock[PATH_MAX];
	unsigned char md[32];
	unsigned int mdlen;
	char h[65];
	int fd;

	if (mkdir_p(d->cfg.state_dir, 0700) < 0)
		return err_sys(err, errno, "creating state directory %s", d->cfg.state_dir);
	if (!realpath(d->cfg.state_dir, real))
		return err_sys(err, errno, "resolving %s", d->cfg.state_dir);
	snprintf(d->cfg.state_dir, sizeof(d->cfg.state_dir), "%s", real);
	EVP_Digest(real, strlen(real), md, &mdlen, EVP_sha256(), NULL);
	hex(md, 8, h);
	memcpy(d->state_tag, h, 17);
	snprintf(d->cgroup_scope, sizeof(d->cgroup_scope), "space-%s", d->state_tag);
	/* One daemon per state directory: a second would fight over the VMs. */
	snprintf(lock, sizeof(lock), "%s/spaced.lock", real);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_sys(err, errno, "opening %s", lock);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return err_set(err, EBUSY, "another spaced is using state directory %s", real);
	}
	/* fd stays open (and locked) for the daemon's life; children let go of it at once */
	proc_close_in_children(fd);
	/* Snapshots clones map live under /dev/shm: that directory must be
	 * ours alone before anything goes there. */
	char tmpfs[PATH_MAX];
	path_tmpfs_root(d, tmpfs);
	/* /dev/shm is world-writable: its space-<tag> must be a directory of
	 * ours (lstat: not a link someone planted), checked before anything
	 * below it is trusted. */
	if (path_mkdirs(tmpfs, err) < 0)
		return err_wrap(err, "preparing tmpfs for snapshots");
	strncat(tmpfs, "/snapshots", sizeof(tmpfs) - strlen(tmpfs) - 1);
	if (path_mkdirs(tmpfs, err) < 0)
		return err_wrap(err, "preparing tmpfs for snapshots");
	return 0;
}

enum key_origin { KEY_GIVEN, KEY_STORED, KEY_GENERATED };

/* <state>/api-key: the stored key for clients on this host
 * (SPACE_API_KEY_FILE), mode 0600 in the 0700 state directory. Rewritten
 * (whole, by rename) only when it does not hold the key already. */
static void write_key_file(const struct spaced *d, const char *path)
{
	char tmp[PATH_MAX + 8], cur[sizeof(d->cfg.api_key)];
	size_t len = strlen(d->cfg.api_key);
	space_err err = { 0 };
	int fd;

	if (keyfile_read(path, cur, sizeof(cur), &err) == 0 && strcmp(cur, d->cfg.api_key) == 0)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		log_warn("writing %s: %s", tmp, strerror(errno));
		return;
	}
	if (write(fd, d->cfg.api_key, len) != (ssize_t)len || write(fd, "\n", 1) != 1 || close(fd) < 0 ||
	    rename(tmp, path) < 0) {
		log_warn("writing %s: %s", path, strerror(errno));
		unlink(tmp);
	}
}

static int ensure_api_key(struct spaced *d, enum key_origin *origin, space_err *err)
{
	/* E2B's SDKs refuse, before sending anything, a key that is not "e2b_" and hex
	 * (the Python SDK checks it); 20 random bytes make 40 digits, as E2B's own keys have. */
	unsigned char raw[20];

	*origin = KEY_GIVEN;
	if (d->cfg.api_key[0])
		return 0;
	*origin = KEY_STORED;
	if (store_kv_get(d->store, "api_key", d->cfg.api_key, sizeof(d->cfg.api_key), err) == 0 &&
	    d->cfg.api_key[0])
		return 0;
	err_clear(err);
	*origin = KEY_GENERATED;
	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return err_set(err, EIO, "generating an API key: no randomness");
	memcpy(d->cfg.api_key, "e2b_", 4);
	hex(raw, sizeof(raw), d->cfg.api_key + 4);
	return store_kv_set(d->store, "api_key", d->cfg.api_key, err);
}

/* The key itself goes to the terminal once, when it is made; never to a log
 * (stdout is often one). Otherwise we say where clients find it. */
static void show_api_key(const struct spaced *d, enum key_origin origin)
{
	char path[PATH_MAX];

	if (origin == KEY_GIVEN) {
		printf("  API key:       as given (%s)\n", d->cfg.api_key_file[0] ? d->cfg.api_key_file : "--api-key");
		return;
	}
	snprintf(path, sizeof(path), "%s/api-key", d->cfg.state_dir);
	write_key_file(d, path);
	if (origin == KEY_GENERATED && isatty(STDOUT_FILENO))
		printf("  API key:       %s (new; shown once, also in %s)\n", d->cfg.api_key, path);
	else
		printf("  API key:       in %s\n", path);
	printf("try: SPACE_URL=http://%s SPACE_API_KEY_FILE=%s build/bin/spacectl info\n", d->cfg.listen, path);
}

/* What a user pastes to point E2B's SDKs here (E2B_SANDBOX_URL: every sandbox's traffic goes
 * through our data plane, routed by its headers). */
static void show_e2b_env(const struct spaced *d, enum key_origin origin)
{
	char path[PATH_MAX];

	printf("E2B SDKs:\n");
	printf("  export E2B_API_URL=%s\n", d->e2b_api_url);
	printf("  export E2B_SANDBOX_URL=%s\n", d->cfg.data_url);
	if (origin == KEY_GIVEN && d->cfg.api_key_file[0])
		printf("  export E2B_API_KEY=$(cat %s)\n", d->cfg.api_key_file);
	else if (origin == KEY_GIVEN)
		printf("  export E2B_API_KEY=<the key given with --api-key>\n");
	else if (origin == KEY_GENERATED && isatty(STDOUT_FILENO))
		printf("  export E2B_API_KEY=%s\n", d->cfg.api_key);
	else {
		snprintf(path, sizeof(path), "%s/api-key", d->cfg.state_dir);
		printf("  export E2B_API_KEY=$(cat %s)\n", path);
	}
}

/* KVM when it can boot our guest, else TCG; the probe result is kept per
 * host kernel and QEMU build so it runs once. */
static void choose_accel(struct spaced *d)
{
	struct template_rec t = { 0 };
	char key[256], val[300], kernel[PATH_MAX], image[PATH_MAX], work[PATH_MAX];
	space_err err = { 0 };
	struct utsname u;
	struct stat st;
	enum accel a;

	if (!strcmp(d->cfg.accel, "tcg") || !strcmp(d->cfg.accel, "kvm")) {
		d->accel = strcmp(d->cfg.accel, "kvm") ? ACCEL_TCG : ACCEL_KVM;
		snprintf(d->accel_reason, sizeof(d->accel_reason), "chosen by --accel %s", d->cfg.accel);
		return;
	}
	uname(&u);
	if (stat(QEMU_BIN, &st) < 0)
		st.st_mtime = 0;
	/* Per host: in a cluster the store is shared, and nodes with the same kernel may differ
	 * in whether KVM works. */
	snprintf(key, sizeof(key), "accel:%s:%lld%s%s", u.release, (long long)st.st_mtime,
		 d->cfg.role == DROLE_NODE ? ":" : "", d->cfg.role == DROLE_NODE ? d->cfg.node_id : "");
	if (store_kv_get(d->store, key, val, sizeof(val), &err) == 0 && val[0] && strchr(val, '|')) {
		d->accel = strncmp(val, "kvm|", 4) ? ACCEL_TCG : ACCEL_KVM;
		snprintf(d->accel_reason, sizeof(d->accel_reason), "%s (probed earlier)", strchr(val, '|') + 1);
		return;
	}
	if (store_template_resolve(d->store, "minimal", &t, &err) < 0) {
		d->accel = ACCEL_TCG;
		snprintf(d->accel_reason, sizeof(d->accel_reason), "no template to probe KVM with; using TCG");
		return;
	}
	snprintf(kernel, sizeof(kernel), "%s/vmlinuz", t.dir);
	snprintf(image, sizeof(image), "%s/rootfs.ext4", t.dir);
	snprintf(work, sizeof(work), "%s/probe", d->cfg.state_dir);
	mkdir(work, 0700);
	template_rec_clear(&t);
	/* Jailed as the uid just past the VMs' range (jail.md). */
	uid_t probe_uid = d->cfg.jail ? (uid_t)(d->cfg.jail_uid_base + d->cfg.jail_uid_count) : 0;
	a = accel_probe(kernel, image, work, probe_uid, PROBE_TIMEOUT_MS, d->accel_reason,
			sizeof(d->accel_reason));
	d->accel = a;
	snprintf(val, sizeof(val), "%s|%s", accel_name(a), d->accel_reason);
	if (store_kv_set(d->store, key, val, &err) < 0)
		log_warn("remembering the accelerator: %s", err.msg);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct spaced *d = arg;

	(void)what;
	log_info("signal %d: shutting down; sandboxes keep running and are adopted at the next start",
		 (int)sig);
	event_base_loopexit(d->base, NULL);
}

/* --tls-cert/--tls-key: both listeners speak TLS; --cluster-ca: an api process verifies the
 * https:// nodes it relays to (http/tls.h). */
static int start_tls(struct spaced *d, space_err *err)
{
	if (d->cfg.tls_cert[0] && !(d->tls_server = http_tls_server_ctx(d->cfg.tls_cert, d->cfg.tls_key, err)))
		return err_wrap(err, "--tls-cert");
	if (d->cfg.cluster_ca[0] && !(d->tls_client = http_tls_client_ctx(d->cfg.cluster_ca, err)))
		return err_wrap(err, "--cluster-ca");
	return 0;
}

/* After the listeners are gone (a context outlives its connections by their references). */
static void stop_tls(struct spaced *d)
{
	SSL_CTX_free(d->tls_server);
	SSL_CTX_free(d->tls_client);
	d->tls_server = d->tls_client = NULL;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct spaced *d = arg;

	(void)fd;
	(void)what;
	if (d->cfg.role != DROLE_API)
		sandbox_tick(d);
	cluster_tick(d);
	events_tick(d);
	/* Bodies of unauthenticated clients came and went (preauth.c): what the allocator keeps of
	 * them goes back to the system, so that a burst leaves no lasting footprint. */
	if (http_conns_unauth_released(d->conns) >= (8u << 20))
		malloc_trim(0);
}

/* An api process: operations finish in other processes. Each one that finishes is heard as it
 * commits (cluster/push.c); this look, every --backstop-ms, is for one announced while the
 * listening connection was being opened again. */
static void on_poll(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	ops_poll(arg);
}

/* What only a process that runs VMs does at start: templates, the accelerator, capacity, and
 * adopting what outlived the last run. */
static int start_vms(struct spaced *d, space_err *err)
{
	char images[PATH_MAX];

	/* Template rows are shared by a cluster's nodes; the files are each node's own. */
	snprintf(images, sizeof(images), "%s/images", d->cfg.state_dir);
	if (d->cfg.role == DROLE_NODE)
		store_set_images(d->store, images);
	if (templates_import(d, err) < 0)
		return -1;
	choose_accel(d);
	log_info("accelerator: %s (%s)", accel_name(d->accel), d->accel_reason);
	capacity_init(d);
	if (!d->cfg.jail)
		log_warn("--no-jail: QEMU runs as root with the daemon's environment and no seccomp filter; "
			 "for debugging only, a guest escape owns the host");
	if (cluster_start(d, err) < 0 || sandbox_reconcile(d, err) < 0 || pools_init(d, err) < 0)
		return -1;
	builds_load(d);
	return 0;
}

static void on_store_done(evutil_socket_t fd, short what, void *arg)
{
	struct spaced *d = arg;

	(void)fd;
	(void)what;
	store_async_poll(d->store);
}

static int open_store(struct spaced *d, space_err *err)
{
	char url[sizeof(d->cfg.store_url)];

	if (d->cfg.store_url[0])
		snprintf(url, sizeof(url), "%s", d->cfg.store_url);
	else
		snprintf(url, sizeof(url), "sqlite:%s/space.db", d->cfg.state_dir);
	/* What the cluster's worker opens too (its own connection). */
	snprintf(d->cfg.store_url, sizeof(d->cfg.store_url), "%s", url);
	if (store_open_url(&d->store, url, err) < 0)
		return -1;
	/* The loop never waits on the database for its sandbox, operation and session writes:
	 * they go to the store's own thread (docs/design/store.md, "Write-behind"). */
	if (store_write_behind(d->store, url, err) < 0)
		return -1;
	d->store_ev = event_new(d->base, store_async_fd(d->store), EV_READ | EV_PERSIST, on_store_done, d);
	if (!d->store_ev || event_add(d->store_ev, NULL) < 0)
		return err_set(err, ENOMEM, "out of memory");
	return 0;
}


static int run(struct spaced *d)
{
	char ports[512];
	struct event *sigint, *sigterm, *poll = NULL;
	struct timeval one = { 1, 0 };
	struct timeval backstop = { d->cfg.backstop_ms / 1000, (d->cfg.backstop_ms % 1000) * 1000 };
	struct http_limits lim;
	enum key_origin key_origin;
	space_err err = { 0 };

	if (d->cfg.jail && d->cfg.role != DROLE_API && geteuid() != 0) {
		err_set(&err, EPERM, "the jail every QEMU runs in needs root (uids, mounts, cgroups); run spaced "
				     "as root, or with --no-jail for debugging (unsafe)");
		goto fail;
	}
	/* The key file first: a bad one stops us before anything is made. */
	if (config_read_key_file(&d->cfg, &err) < 0 || config_read_cluster_key(&d->cfg, &err) < 0 ||
	    prepare_state_dir(d, &err) < 0)
		goto fail;
	/* Each front end's webhook format, before the stored webhooks are read. */
	webhook_format_add(&e2b_webhook_format);
	if (open_store(d, &err) < 0 || ensure_api_key(d, &key_origin, &err) < 0 || events_init(d, &err) < 0)
		goto fail;
	limits_init(&d->cfg);
	lim = (struct http_limits){ .max_conns = (unsigned)d->cfg.max_conns,
				    .max_conns_per_client = (unsigned)d->cfg.max_conns_per_client,
				    .request_timeout_s = d->cfg.request_timeout_s,
				    .unauth_bytes = (uint64_t)d->cfg.unauth_budget_mib << 20,
				    .unauth_bytes_per_client = (uint64_t)d->cfg.unauth_budget_per_client_mib << 20 };
	d->conns = http_conns_new(d->base, &lim);
	if (!d->conns) {
		err_set(&err, ENOMEM, "out of memory");
		goto fail;
	}
	if (d->cfg.role == DROLE_API)
		snprintf(d->accel_reason, sizeof(d->accel_reason),
			 "an api process runs no VMs: each node has its own (GET /v1/nodes)");
	if (start_tls(d, &err) < 0 || net_ingress_init(&err) < 0)
		goto fail;
	if ((d->cfg.role != DROLE_API && start_vms(d, &err) < 0) ||
	    (d->cfg.role == DROLE_API && cluster_start(d, &err) < 0) || listeners_start(d, &err) < 0)
		goto fail;
	d->tick = event_new(d->base, -1, EV_PERSIST, on_tick, d);
	evtimer_add(d->tick, &one);
	if (d->cfg.role == DROLE_API) {
		poll = event_new(d->base, -1, EV_PERSIST, on_poll, d);
		evtimer_add(poll, &backstop);
	}
	sigint = evsignal_new(d->base, SIGINT, on_signal, d);
	sigterm = evsignal_new(d->base, SIGTERM, on_signal, d);
	evsignal_add(sigint, NULL);
	evsignal_add(sigterm, NULL);
	if (d->cfg.role == DROLE_API)
		printf("SPACE %s is up (role: api, store: %s)\n", SPACE_VERSION, store_backend(d->store));
	else if (d->cfg.role == DROLE_NODE)
		printf("SPACE %s is up (role: node %s, accelerator: %s, store: %s)\n", SPACE_VERSION, d->cfg.node_id,
		       accel_name(d->accel), store_backend(d->store));
	else
		printf("SPACE %s is up (accelerator: %s)\n", SPACE_VERSION, accel_name(d->accel));
	printf("  control plane: %s://%s\n", d->tls_server ? "https" : "http", d->cfg.listen);
	printf("  data plane:    %s\n", d->cfg.data_url);
	port_url(d->cfg.data_url, d->cfg.ports_domain, 0, "{sandbox id}", ports, sizeof(ports));
	printf("  ports:         %s (spacectl expose ID PORT)\n", ports);
	printf("  state dir:     %s\n", d->cfg.state_dir);
	show_api_key(d, key_origin);
	show_e2b_env(d, key_origin);
	fflush(stdout);
	event_base_dispatch(d->base);
	event_free(sigint);
	event_free(sigterm);
	event_free(d->tick);
	if (poll)
		event_free(poll);
	cluster_stop(d);
	free(d->secrets_sig);
	sandbox_shutdown(d);
	events_free(d);
	gw_reapers_finish();
	memimg_forget_all();
	if (d->store_ev)
		event_free(d->store_ev);
	store_close(d->store);
	builds_free(d);
	stop_tls(d);
	return 0;
fail:
	log_error("%s", err.msg);
	cluster_stop(d);
	/* What a failed start made is let go of (QEMUs it adopted run on), so that
	 * LeakSanitizer sees none once d goes with main's frame. */
	if (d->store) {
		sandbox_shutdown(d);
		events_free(d);
		if (d->store_ev)
			event_free(d->store_ev);
		d->store_ev = NULL;
		store_close(d->store);
		d->store = NULL;
	}
	builds_free(d);
	stop_tls(d);
	return 1;
}

/* The loop: after each bulk callback it looks for I/O again (see
 * SPACED_PRIO_BULK); events are at the default priority unless set. */
static struct event_base *make_base(void)
{
	struct event_config *cfg = event_config_new();
	struct event_base *base = NULL;

	if (!cfg)
		return NULL;
	if (event_config_set_max_dispatch_interval(cfg, NULL, 1, SPACED_PRIO_BULK) == 0)
		base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (base && event_base_priority_init(base, SPACED_PRIOS) < 0) {
		event_base_free(base);
		return NULL;
	}
	return base;
}

int main(int argc, char **argv)
{
	struct spaced d = { 0 };
	int rc;

	log_set_prefix("spaced");
	if (getenv("SPACE_DEBUG") && *getenv("SPACE_DEBUG"))
		log_set_level(LOG_DEBUG);
	signal(SIGPIPE, SIG_IGN);
	/* Whatever the daemon creates is its own; what must be readable by
	 * others (a disk layer a jailed QEMU reads) is chmod'ed explicitly. */
	umask(077);
	config_load(&d.cfg, argc, argv);
	store_take_env_secrets();
	d.started_ms = now_ms();
	d.base = make_base();
	if (!d.base) {
		log_error("cannot create the event loop");
		return 1;
	}
	rc = run(&d);
	/* A failed start (e.g. the state directory is locked) gets here with
	 * nothing attached to the loop; free it so LeakSanitizer sees none. */
	if (rc != 0)
		event_base_free(d.base);
	return rc;
}
