/* e2b_render.c -- the core's records in the shapes of E2B's control plane (what its SDK's
 * getInfo, list, create/connect, listSnapshots and getMetrics read) */
#include <stdio.h>
#include <string.h>

#include "e2b.h"
#include "e2b_ctl.h"

/* E2B's clientID: one fixed name for this node (the SDK only passes it along). */
#define E2B_CLIENT_ID "space"
#define MIB (1024 * 1024)

enum e2b_state e2b_state_of(enum sb_state s)
{
	switch (s) {
	case SB_CREATING:
	case SB_RUNNING:
	case SB_RESTORING:
		return E2B_RUNNING;
	case SB_PAUSING:
	case SB_PAUSED:
	case SB_SUSPENDING:
	case SB_SUSPENDED:
	case SB_STOPPING:
	case SB_STOPPED:
		return E2B_PAUSED;
	case SB_DELETING:
	case SB_DELETED:
	case SB_FAILED:
	case SB_LOST:
	case SB__COUNT:
		break;
	}
	return E2B_NONE;
}

const char *e2b_state_name(enum e2b_state s)
{
	return s == E2B_RUNNING ? "running" : s == E2B_PAUSED ? "paused" : "unknown";
}

const char *e2b_template_id(const struct sandbox_rec *sb)
{
	return sb->template_ref[0] ? sb->template_ref : sb->source_snapshot;
}

static json_t *time_json(int64_t ms)
{
	char t[32];

	if (ms <= 0)
		return json_null();
	fmt_time(t, ms);
	return json_string(t);
}

/* The template's name without a tag: E2B's alias. */
static json_t *alias_json(const struct sandbox_rec *sb)
{
	char a[sizeof(sb->template_ref)];
	char *c;

	if (!sb->template_ref[0] || strncmp(sb->template_ref, "sha256:", 7) == 0)
		return json_null();
	snprintf(a, sizeof(a), "%s", sb->template_ref);
	if ((c = strchr(a, '@')) || (c = strchr(a, ':')))
		*c = '\0';
	return json_string(a);
}

json_t *e2b_sandbox_json(const struct sandbox_rec *sb, int64_t disk_mb)
{
	return json_pack("{s:s,s:s,s:o,s:s,s:i,s:i,s:I,s:o,s:o,s:s,s:s,s:O*,s:{s:s,s:b}}",
			 "sandboxID", sb->id,
			 "templateID", e2b_template_id(sb),
			 "alias", alias_json(sb),
			 "clientID", E2B_CLIENT_ID,
			 "cpuCount", sb->vcpus,
			 "memoryMB", sb->memory_mib,
			 "diskSizeMB", (json_int_t)disk_mb,
			 "startedAt", time_json(sb->created_ms),
			 "endAt", time_json(sb->expires_ms),
			 "state", e2b_state_name(e2b_state_of(sb->state)),
			 "envdVersion", E2B_ENVD_VERSION,
			 "metadata", sb->metadata,
			 "lifecycle",
			 "onTimeout", sb->on_timeout == ON_TIMEOUT_DELETE ? "kill" : "pause",
			 "autoResume", 0);
}

/* E2B's whole IPv4 internet (e2b_req.c maps allow_internet_access onto it). */
#define E2B_ALL_V4 "0.0.0.0/0"

static bool has_str(const json_t *l, const char *s)
{
	const json_t *x;
	size_t i;

	json_array_foreach(l, i, x)
		if (json_is_string(x) && strcmp(json_string_value(x), s) == 0)
			return true;
	return false;
}

/* The strings of l but skip; NULL when out of memory. */
/* The strings of l but skip and skip2 (NULL: none). */
static json_t *strs_but(const json_t *l, const char *skip, const char *skip2)
{
	json_t *out = json_array();
	const json_t *x;
	size_t i;

	json_array_foreach(l, i, x)
		if (out && json_is_string(x) && strcmp(json_string_value(x), skip) != 0 &&
		    !(skip2 && strcmp(json_string_value(x), skip2) == 0) && json_array_append(out, (json_t *)x) < 0) {
			json_decref(out);
			return NULL;
		}
	return out;
}

/* The inverse of e2b_req_network: an open policy (allow holds the whole internet) is
 * allowInternetAccess with its exceptions; a closed one denies 0.0.0.0/0 and allows its list.
 * The stored policy is our own, normalised, yet read defensively (absent lists are empty). */
int e2b_network_json(const json_t *policy, bool *open, json_t **out)
{
	const json_t *allow = json_object_get(policy, "allow"), *deny = json_object_get(policy, "deny");
	json_t *a, *d;

	*open = json_is_array(allow) && has_str(allow, E2B_ALL_V4);
	/* open: "*" (every name) is part of E2B's internet, not an exception of its own */
	a = strs_but(allow, E2B_ALL_V4, *open ? "*" : NULL);
	d = *open ? strs_but(deny, "", NULL) : json_pack("[s]", E2B_ALL_V4);
	*out = a && d ? json_pack("{s:o,s:o}", "allowOut", a, "denyOut", d) : NULL;
	if (!*out) {
		if (!a || !d) {
			json_decref(a);
			json_decref(d);
		}
		return -1;
	}
	return 0;
}

json_t *e2b_sandbox_detail_json(const struct sandbox_rec *sb, int64_t disk_mb)
{
	json_t *o = e2b_sandbox_json(sb, disk_mb), *net = NULL;
	bool open;

	if (!o || e2b_network_json(sb->network, &open, &net) < 0 ||
	    json_object_set_new(o, "allowInternetAccess", json_boolean(open)) < 0 ||
	    json_object_set_new(o, "network", net) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *e2b_created_json(const struct sandbox_rec *sb, const char *token, const char *domain)
{
	/* trafficAccessToken is the envd token too: the code interpreter's SDK sends only that
	 * header on /contexts (envd_auth takes either). */
	return json_pack("{s:s,s:s,s:s,s:o,s:s,s:s,s:s,s:s}",
			 "sandboxID", sb->id,
			 "clientID", E2B_CLIENT_ID,
			 "templateID", e2b_template_id(sb),
			 "alias", alias_json(sb),
			 "envdVersion", E2B_ENVD_VERSION,
			 "envdAccessToken", token,
			 "trafficAccessToken", token,
			 "domain", domain);
}

json_t *e2b_template_json(const struct template_rec *t)
{
	json_t *names = json_array(), *tag;
	size_t i;

	if (!names)
		return NULL;
	json_array_foreach(t->tags, i, tag)
		json_array_append(names, tag);
	return json_pack("{s:s,s:s,s:i,s:i,s:I,s:b,s:[s],s:o,s:o,s:o,s:s,s:s,s:i,s:i}",
			 "templateID", t->name,
			 "buildID", t->digest,
			 "cpuCount", t->vcpus,
			 "memoryMB", t->memory_mib,
			 "diskSizeMB", (json_int_t)((t->image_bytes + MIB - 1) / MIB),
			 "public", 1,
			 "aliases", t->name,
			 "names", names,
			 "createdAt", time_json(t->created_ms),
			 "updatedAt", time_json(t->created_ms),
			 "buildStatus", "ready",
			 "envdVersion", E2B_ENVD_VERSION,
			 "spawnCount", 0,
			 "buildCount", 1);
}

json_t *e2b_snapshot_json(const struct snapshot_rec *s)
{
	return json_pack("{s:s,s:[s]}", "snapshotID", s->id, "names", s->name);
}

json_t *e2b_metrics_json(const char *stat, uint64_t pid_start, double uptime_s, long hz, long page,
			 const struct sandbox_rec *sb, int64_t disk_used, int64_t now)
{
	unsigned long long utime, stime, start;
	long long rss;
	const char *p = strrchr(stat, ')');
	double alive, pct;
	char ts[32];
	json_t *m;

	/* Fields after "pid (comm)": state(3) ... utime(14) stime(15) ... starttime(22) vsize(23)
	 * rss(24); comm may hold spaces and parentheses, hence the last ')'. */
	if (!p || hz <= 0 || page <= 0 ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu %*u %lld",
		   &utime, &stime, &start, &rss) != 4)
		return NULL;
	if (start != pid_start)
		return NULL;
	alive = uptime_s - (double)start / (double)hz;
	/* CPU: the QEMU process's share of the sandbox's vCPUs, averaged over its life. */
	pct = alive > 0 ? (double)(utime + stime) / (double)hz / alive * 100.0 / (sb->vcpus > 0 ? sb->vcpus : 1) : 0;
	if (pct > 100)
		pct = 100;
	fmt_time(ts, now);
	m = json_pack("{s:s,s:I,s:i,s:f,s:I,s:I}",
		      "timestamp", ts,
		      "timestampUnix", (json_int_t)(now / 1000),
		      "cpuCount", sb->vcpus,
		      "cpuUsedPct", (double)(long long)(pct * 100) / 100.0,
		      "memUsed", (json_int_t)(rss * page),
		      "memTotal", (json_int_t)sb->memory_mib * MIB);
	if (m && disk_used >= 0)
		json_object_set_new(m, "diskUsed", json_integer(disk_used));
	return m;
}

void e2b_api_url(const char *listen, char *out, size_t len)
{
	snprintf(out, len, "http://%s%s", listen[0] == ':' ? "127.0.0.1" : "", listen);
}
