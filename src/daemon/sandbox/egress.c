/* egress.c -- when a sandbox's network exists: its netns, CA and gateway made before each
 * launch, the policy (secret values resolved) pushed to the gateway, the gateway watched and
 * brought back, all of it removed with the sandbox (docs/design/egress.md) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "egress/binding.h"
#include "egress/ca.h"
#include "egress/policy.h"
#include "log.h"
#include "net/net.h"
#include "runtime.h"
#include "store/store.h"
#include "vmm/proc.h"

/* A CA file (the key is 0600 root; it never enters a VM) is at most this big. */
#define CA_FILE_MAX (64 * 1024)

/* A gateway that will not start does not stop the VM: without it the ruleset sends every
 * guest connection to a port nobody listens on, so the sandbox reaches nothing (fails
 * closed), and egress_tick keeps trying after this long. The netns and TAP are the VM's,
 * so they must be. */
#define GW_RETRY_MS 10000

bool egress_enabled(const struct spaced *d)
{
	(void)d;
	/* Namespaces, TAPs and nftables need root, like the VMs' own netns (sandbox_spec). */
	return geteuid() == 0;
}

static void ca_paths(const struct sandbox *sb, char crt[PATH_MAX], char key[PATH_MAX])
{
	char dir[PATH_MAX];

	path_run_dir(sb->d, sb->rec.id, dir);
	snprintf(crt, PATH_MAX, "%s/egress-ca.crt", dir);
	snprintf(key, PATH_MAX, "%s/egress-ca.key", dir);
}

static int write_file(const char *path, const char *text, space_err *err)
{
	char tmp[PATH_MAX + 8];
	size_t len = strlen(text);

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return err_sys(err, errno, "creating %s", tmp);
	/* No fsync: this runs on the loop during creates, and a CA lost to a crash is made
	 * again and sent to the guest with its next identity (every launch sends one). */
	if (write(fd, text, len) != (ssize_t)len || rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return err_sys(err, e, "writing %s", path);
	}
	return 0;
}

/* The whole file, NUL-terminated, malloc'ed; NULL with errno. */
static char *read_small(const char *path)
{
	struct stat st;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0 || fstat(fd, &st) < 0)
		return NULL;
	if (!S_ISREG(st.st_mode) || st.st_size > CA_FILE_MAX) {
		errno = EINVAL;
		return NULL;
	}
	char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return NULL;
	ssize_t n = read(fd, buf, (size_t)st.st_size);
	if (n != st.st_size) {
		free(buf);
		errno = EIO;
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

char *egress_ca_cert(const struct sandbox *sb)
{
	char crt[PATH_MAX], key[PATH_MAX];

	ca_paths(sb, crt, key);
	return read_small(crt);
}

/* The sandbox's own CA, made the first time its network is. A fork child has its own
 * run_dir, so its own CA. */
static int ca_ensure(struct sandbox *sb, space_err *err)
{
	char crt[PATH_MAX], key[PATH_MAX], cn[96], dir[PATH_MAX];
	char *cert = NULL, *pkey = NULL;

	ca_paths(sb, crt, key);
	if (access(crt, R_OK) == 0 && access(key, R_OK) == 0)
		return 0;
	path_run_dir(sb->d, sb->rec.id, dir);
	if (path_mkdirs(dir, err) < 0)
		return -1;
	snprintf(cn, sizeof(cn), "SPACE sandbox %s egress CA", sb->rec.id);
	if (egress_ca_generate(cn, &cert, &pkey, err) < 0)
		return err_wrap(err, "generating the sandbox's CA");
	int rc = write_file(key, pkey, err);
	if (rc == 0)
		rc = write_file(crt, cert, err);
	explicit_bzero(pkey, strlen(pkey));
	free(pkey);
	free(cert);
	return rc;
}

bool egress_injects_secrets(const json_t *network)
{
	return json_array_size(json_object_get(network, "inject")) > 0;
}

/* Is the rule's host inside the secret's binding (its hosts, JSON text as stored)? */
static bool rule_bound(const json_t *rule, const char *hosts)
{
	json_t *binding = json_loads(hosts, 0, NULL), *one = json_pack("{s:[],s:[O]}", "allow", "inject", rule);
	struct egress_policy *p = NULL;
	space_err e = { 0 };
	bool ok = false;

	if (binding && one && egress_policy_parse(one, false, &p, &e) == 0 && p->ninject == 1)
		ok = egress_binding_covers(binding, &p->inject[0].host);
	egress_policy_free(p);
	json_decref(one);
	json_decref(binding);
	return ok;
}

int egress_check_bindings(struct store *st, const json_t *network, space_err *err)
{
	json_t *inject = json_object_get(network, "inject"), *rule;
	size_t i;

	json_array_foreach(inject, i, rule) {
		const char *name = json_string_value(json_object_get(rule, "secret"));
		struct secret_rec meta;
		space_err e = { 0 };
		json_t *binding;
		int rc;

		if (!name || store_secret_get(st, name, &meta, NULL, &e) < 0) {
			if (e.code && e.code != ENOENT)
				return err_set(err, e.code, "%s", e.msg);
			continue;
		}
		binding = json_loads(meta.hosts, 0, NULL);
		rc = egress_binding_check(network, name, binding, err);
		json_decref(binding);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* The policy as the gateway gets it: each inject rule's "value" = prefix + the secret's
 * value, read from st (the store's thread: a resolve job, api_read, create_read; NULL only
 * for a policy that injects nothing); a secret that does not exist adds no value (the
 * gateway then injects nothing and audits secret-missing), and neither does one whose hosts
 * no longer include the rule's (its binding was narrowed after the policy was accepted). */
json_t *egress_resolve(struct store *st, const json_t *network, space_err *err)
{
	json_t *p = json_deep_copy(json_is_object(network) ? network : json_object());
	json_t *inject = json_object_get(p, "inject"), *rule;
	size_t i;

	if (!p)
		return err_set(err, ENOMEM, "out of memory"), NULL;
	json_array_foreach(inject, i, rule) {
		const char *name = json_string_value(json_object_get(rule, "secret"));
		const char *prefix = json_string_value(json_object_get(rule, "prefix"));
		struct secret_rec meta;
		char *value = NULL;
		space_err e = { 0 };

		if (!name || !st || store_secret_get(st, name, &meta, &value, &e) < 0) {
			if (e.code && e.code != ENOENT) {
				json_decref(p);
				return err_set(err, e.code, "%s", e.msg), NULL;
			}
			continue;
		}
		if (!rule_bound(rule, meta.hosts)) {
			log_warn("secret %s is not bound to %s: not sent to the gateway", name,
				 json_string_value(json_object_get(rule, "host")));
			explicit_bzero(value, strlen(value));
			free(value);
			continue;
		}
		char *full = NULL;
		if (asprintf(&full, "%s%s", prefix ? prefix : "", value) < 0)
			full = NULL;
		explicit_bzero(value, strlen(value));
		free(value);
		if (!full || json_object_set_new(rule, "value", json_string(full)) < 0) {
			free(full);
			json_decref(p);
			return err_set(err, ENOMEM, "out of memory"), NULL;
		}
		explicit_bzero(full, strlen(full));
		free(full);
	}
	return p;
}

/* json_decref that first clears the strings secret values were copied into. */
void egress_resolved_free(json_t *p)
{
	json_t *rule;
	size_t i;

	json_array_foreach(json_object_get(p, "inject"), i, rule) {
		json_t *v = json_object_get(rule, "value");
		if (json_is_string(v))
			explicit_bzero((char *)json_string_value(v), json_string_length(v));
	}
	json_decref(p);
}

static void first_push_done(struct gw *g, const space_err *err, void *arg);

/* The resolved policy and the CA of the sandbox, to its gateway: sync (a gateway that runs
 * answers in well under a millisecond) or, for one just spawned, from the loop. */
static int push_resolved(struct sandbox *sb, bool async, const json_t *policy, space_err *err)
{
	char crt[PATH_MAX], key[PATH_MAX];

	ca_paths(sb, crt, key);
	_cleanup_free_ char *cert = read_small(crt);
	char *pkey = read_small(key);
	if (!cert || !pkey) {
		free(pkey);
		return err_sys(err, errno, "reading the CA of %s", sb->rec.id);
	}
	int rc = async ? gw_push_async(sb->gw, ++sb->net_gen, policy, cert, pkey, first_push_done, sb, err)
		       : gw_push(sb->gw, ++sb->net_gen, policy, cert, pkey, err);
	explicit_bzero(pkey, strlen(pkey));
	free(pkey);
	return rc;
}

/* A policy that injects secrets has their values read on the store's thread (never on the
 * loop), then goes to the gateway it was read for, if the sandbox still has that one (a
 * gateway that exited, or was stopped, gets its policy from the next one's first push). */
struct resolve_job {
	struct spaced *d;
	char sb_id[ID_LEN];
	uint64_t gw_seq;
	bool first;
	json_t *network; /* a deep copy: the loop keeps its own */
	json_t *policy;
	space_err err;
};

static void resolve_run(struct store *conn, void *arg)
{
	struct resolve_job *j = arg;

	j->policy = egress_resolve(conn, j->network, &j->err);
}

static int push(struct sandbox *sb, bool first, space_err *err);

static void resolve_done(void *arg, bool ran)
{
	struct resolve_job *j = arg;
	struct sandbox *sb = ran ? sandbox_find(j->d, j->sb_id) : NULL;
	space_err e = { 0 };

	if (sb && sb->gw && sb->gw_seq == j->gw_seq && sb->net_resolving) {
		sb->net_resolving = false;
		int rc = j->policy ? push_resolved(sb, j->first, j->policy, &e) : (e = j->err, -1);
		if (rc < 0 && j->first) {
			first_push_done(sb->gw, &e, sb);
		} else if (rc < 0) {
			log_warn("sandbox %s: sending its gateway the policy: %s", sb->rec.id, e.msg);
		} else if (!j->first && sb->net_repush) {
			/* changed again while this one was read */
			sb->net_repush = false;
			if (push(sb, false, &e) < 0)
				log_warn("sandbox %s: sending its gateway the policy: %s", sb->rec.id, e.msg);
		}
	}
	egress_resolved_free(j->policy);
	json_decref(j->network);
	free(j);
}

/* The sandbox's policy to its gateway: at once when it injects no secret, else once their
 * values are read (resolve_done). first: the first push to a gateway just spawned (async;
 * the bring-up waits for first_push_done). */
static int push(struct sandbox *sb, bool first, space_err *err)
{
	struct resolve_job *j;

	if (!egress_injects_secrets(sb->rec.network)) {
		json_t *policy = egress_resolve(NULL, sb->rec.network, err);
		int rc = policy ? push_resolved(sb, first, policy, err) : -1;

		egress_resolved_free(policy);
		return rc;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return err_set(err, ENOMEM, "out of memory");
	j->d = sb->d;
	snprintf(j->sb_id, sizeof(j->sb_id), "%s", sb->rec.id);
	j->gw_seq = sb->gw_seq;
	j->first = first;
	j->network = json_deep_copy(sb->rec.network);
	if (!j->network) {
		free(j);
		return err_set(err, ENOMEM, "out of memory");
	}
	if (store_async(sb->d->store, resolve_run, resolve_done, j, err) < 0) {
		json_decref(j->network);
		free(j);
		return -1;
	}
	sb->net_resolving = true;
	return 0;
}

int egress_push(struct sandbox *sb, const json_t *resolved, space_err *err)
{
	if (!sb->gw)
		return 0; /* pushed when its gateway starts */
	if (gw_push_pending(sb->gw) || sb->net_resolving) {
		sb->net_repush = true; /* the push under way ends first, then this one goes */
		return 0;
	}
	return resolved ? push_resolved(sb, false, resolved, err) : push(sb, false, err);
}

/* The gateway of a VM being brought up answered its first push (or did not): the bring-up
 * may end. A gateway that failed is stopped and tried again later (the guest reaches
 * nothing meanwhile: the ruleset sends it to a port nobody listens on). */
static void first_push_done(struct gw *g, const space_err *err, void *arg)
{
	struct sandbox *sb = arg;
	space_err e = { 0 };

	(void)g;
	if (!err && sb->net_repush) {
		sb->net_repush = false;
		if (push(sb, true, &e) == 0)
			return; /* still pending: this comes back */
		err = &e;
	}
	sb->net_pending = false;
	sb->net_repush = false;
	phases_mark(&sb->phases, PH_POLICY);
	if (err) {
		log_warn("sandbox %s: its gateway: %s (its guest reaches nothing until one runs; retrying)",
			 sb->rec.id, err->msg);
		gw_stop(sb->gw);
		sb->gw = NULL;
		sb->gw_retry_ms = now_ms() + GW_RETRY_MS;
	}
	if (sb->net_waiting) {
		sb->net_waiting = false;
		sandbox_network_ready(sb);
	}
}

static void gw_exited(struct gw *g, const char *why, void *arg)
{
	struct sandbox *sb = arg;

	(void)why;
	if (sb->gw == g) {
		gw_free(g);
		sb->gw = NULL;
	}
	/* Brought back by the next tick if the VM still runs (egress_tick). */
}

static int gw_up(struct sandbox *sb, space_err *err)
{
	char run_dir[PATH_MAX], sock_dir[PATH_MAX], ns[PATH_MAX];
	struct spaced *d = sb->d;

	if (sb->gw)
		return 0;
	path_run_dir(d, sb->rec.id, run_dir);
	path_sock_dir(d, sb->rec.id, sock_dir);
	net_ns_path(d, sb->rec.id, ns);
	/* Its own uid, one no QEMU ever gets: the jail range shifted by its size. */
	uid_t uid = sb->rec.jail_uid ? sb->rec.jail_uid + d->cfg.jail_uid_count : 0;
	struct gw_spec spec = { .id = sb->rec.id, .run_dir = run_dir, .sock_dir = sock_dir, .netns = ns,
				.uid = uid, .gid = uid };
	if (path_mkdirs(run_dir, err) < 0 || path_mkdirs(sock_dir, err) < 0)
		return -1;
	if (gw_start(d, &spec, gw_exited, sb, &sb->gw, err) < 0)
		return -1;
	sb->gw_seq++;
	sb->net_resolving = false;
	/* A gateway just spawned answers once it has started: the push goes from the loop,
	 * and the bring-up waits for it (sandbox_identity_applied). */
	if (push(sb, true, err) < 0) {
		gw_stop(sb->gw);
		sb->gw = NULL;
		return -1;
	}
	sb->net_pending = true;
	return 0;
}

static void ns_made(const space_err *err, void *arg)
{
	struct sandbox *sb = arg;
	space_err e = { 0 };

	sb->net_op = NULL;
	if (err)
		e = *err;
	else
		ca_ensure(sb, &e);
	if (e.code)
		err_wrap(&e, "the sandbox's network");
	sb->net_ready(sb, e.code ? &e : NULL);
}

int egress_prepare(struct sandbox *sb, egress_ready_cb ready, space_err *err)
{
	net_ns_cancel(sb->net_op);
	sb->net_op = NULL;
	sb->net_ready = ready;
	char crt[PATH_MAX], key[PATH_MAX], cn[96], dir[PATH_MAX];
	path_run_dir(sb->d, sb->rec.id, dir);
	if (path_mkdirs(dir, err) < 0)
		return err_wrap(err, "the sandbox's network");
	ca_paths(sb, crt, key);
	snprintf(cn, sizeof(cn), "SPACE sandbox %s egress CA", sb->rec.id);
	struct net_ns_ca ca = { crt, key, cn };
	/* A spare made ahead, if one is ready: then the netns is there (r == 1 below) and only
	 * the CA is made here (one P-256 key and certificate: well under a millisecond). */
	net_spares_take(sb->d->net_spares, sb->rec.id);
	int r = net_ns_begin(sb->d, sb->rec.id, &ca, ns_made, sb, &sb->net_op, err);
	if (r < 0 || (r == 1 && ca_ensure(sb, err) < 0))
		return err_wrap(err, "the sandbox's network");
	return r;
}

void egress_gateway_up(struct sandbox *sb)
{
	space_err e = { 0 };

	if (gw_up(sb, &e) < 0) {
		sb->gw_retry_ms = now_ms() + GW_RETRY_MS;
		log_warn("sandbox %s: its gateway: %s (its guest reaches nothing until one runs; retrying)",
			 sb->rec.id, e.msg);
	}
}

bool egress_wait_ready(struct sandbox *sb)
{
	if (!sb->net_pending)
		return false;
	sb->net_waiting = true;
	return true;
}

void egress_down(struct sandbox *sb)
{
	net_ns_cancel(sb->net_op);
	sb->net_op = NULL;
	gw_stop(sb->gw);
	sb->gw = NULL;
	sb->net_pending = sb->net_waiting = sb->net_repush = sb->net_resolving = false;
}

void egress_remove(struct sandbox *sb)
{
	char run_dir[PATH_MAX];
	space_err err = { 0 };

	egress_down(sb);
	path_run_dir(sb->d, sb->rec.id, run_dir);
	gw_kill_stale(sb->d, run_dir, sb->rec.id);
	if (net_ns_remove(sb->d, sb->rec.id, &err) < 0)
		log_warn("sandbox %s: %s", sb->rec.id, err.msg);
}

/* A bring-up is in flight (its QEMU restoring or booting, its guest applying its identity). */
static bool starting(struct spaced *d)
{
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if (sb->up_done)
			return true;
	return false;
}

void egress_start(struct spaced *d)
{
	if (egress_enabled(d) && d->cfg.net_spares > 0 && !d->net_spares &&
	    !(d->net_spares = net_spares_new(d, d->cfg.net_spares, starting)))
		log_warn("no spare network namespaces: out of memory");
}

void egress_shutdown(struct spaced *d)
{
	net_spares_free(d->net_spares);
	d->net_spares = NULL;
}

void egress_tick(struct spaced *d)
{
	net_spares_fill(d->net_spares);
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
		space_err err = { 0 };

		if (!sb->vm || !sb->net_dev || sb->gw || !sb_state_has_vm(sb->rec.state) ||
		    sb->rec.state == SB_DELETING || now_ms() < sb->gw_retry_ms)
			continue;
		if (gw_up(sb, &err) < 0) {
			sb->gw_retry_ms = now_ms() + GW_RETRY_MS;
			log_warn("sandbox %s: bringing its gateway back: %s", sb->rec.id, err.msg);
		}
	}
}

bool egress_policy_names_secret(const json_t *network, const char *name)
{
	json_t *rule;
	size_t i;

	json_array_foreach(json_object_get(network, "inject"), i, rule) {
		const char *s = json_string_value(json_object_get(rule, "secret"));
		if (s && strcmp(s, name) == 0)
			return true;
	}
	return false;
}

void egress_secret_changed(struct spaced *d, const char *name)
{
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
		space_err err = { 0 };

		if (!sb->gw || !egress_policy_names_secret(sb->rec.network, name))
			continue;
		if (egress_push(sb, NULL, &err) < 0)
			log_warn("sandbox %s: re-sending its policy after secret %s changed: %s", sb->rec.id, name,
				 err.msg);
	}
}

static bool keep_ns(const char *id, void *arg)
{
	return sandbox_find(arg, id) != NULL;
}

/* A gateway lives while its sandbox's VM does. */
static bool keep_gw(const char *id, void *arg)
{
	struct sandbox *sb = sandbox_find(arg, id);

	return sb && sb->vm && sb->rec.state != SB_DELETING;
}

/* An adopted VM's netns had to be made again (it should not: the VM runs in it). */
static void reconciled_net(struct sandbox *sb, const space_err *err)
{
	if (err)
		log_warn("sandbox %s: %s", sb->rec.id, err->msg);
	else if (sb->vm)
		egress_gateway_up(sb);
}

void egress_reconcile(struct spaced *d)
{
	char prefix[PATH_MAX];
	int n = net_ns_sweep(d, keep_ns, d);

	if (n)
		log_info("removed %d network namespace(s) of sandboxes that no longer exist", n);
	/* "/run/netns/space-<tag>-": net_ns_path with an empty id. */
	net_ns_path(d, "", prefix);
	n = gw_sweep(prefix, keep_gw, d);
	if (n)
		log_info("stopped %d gateway(s) of sandboxes without a VM", n);
	n = gw_cgroup_sweep(d, keep_gw, d);
	if (n)
		log_info("removed %d gateway cgroup(s) of sandboxes without a VM", n);
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
		space_err err = { 0 };

		if (!sb->vm)
			continue;
		/* Whether the adopted QEMU has the device: its command line says. */
		sb->net_dev = proc_cmdline_has(vm_pid(sb->vm), "-netdev", "tap");
		if (!sb->net_dev || sb->rec.state == SB_DELETING)
			continue;
		int r = egress_prepare(sb, reconciled_net, &err);
		if (r < 0)
			log_warn("sandbox %s: %s", sb->rec.id, err.msg);
		else if (r == 1)
			egress_gateway_up(sb);
	}
}

int sandbox_set_network(struct spaced *d, const char *id, json_t *network, const json_t *resolved,
			struct sandbox_rec *out, space_err *err)
{
	struct sandbox_rec rec = { 0 };

	if (sandbox_get(d, id, &rec, err) < 0)
		return -1;
	enum sb_state st = rec.state;
	sandbox_rec_clear(&rec);
	struct sandbox *sb = sandbox_find(d, id);
	if (!sb || st == SB_DELETING || st == SB_DELETED || st == SB_FAILED)
		return err_set(err, EBUSY, "sandbox %s is %s; its network can no longer change", id,
			       sb_state_name(st));
	json_decref(sb->rec.network);
	sb->rec.network = json_incref(network);
	sandbox_persist(sb);
	if (egress_push(sb, resolved, err) < 0)
		return -1;
	sandbox_copy_out(sb, out, NULL);
	return 0;
}

bool sandbox_net(const struct spaced *d)
{
	return egress_enabled(d);
}

void sandbox_secret_changed(struct spaced *d, const char *name)
{
	egress_secret_changed(d, name);
}

void path_egress_dir(struct spaced *d, const char *sb_id, char out[PATH_MAX])
{
	char dir[PATH_MAX];

	path_run_dir(d, sb_id, dir);
	snprintf(out, PATH_MAX, "%s/egress", dir);
}
