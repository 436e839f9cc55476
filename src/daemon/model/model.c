/* model.c -- resource state names, the sandbox state machine, ids and times */
#include "model.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static const char *const sb_names[SB__COUNT] = {
	[SB_CREATING] = "creating",     [SB_RUNNING] = "running",
	[SB_PAUSING] = "pausing",       [SB_PAUSED] = "paused",
	[SB_SUSPENDING] = "suspending", [SB_SUSPENDED] = "suspended",
	[SB_RESTORING] = "restoring",   [SB_STOPPING] = "stopping",
	[SB_STOPPED] = "stopped",       [SB_DELETING] = "deleting",
	[SB_DELETED] = "deleted",       [SB_FAILED] = "failed",
	[SB_LOST] = "lost",
};

static const char *const op_names[OP__COUNT] = {
	[OP_PENDING] = "pending",
	[OP_RUNNING] = "running",
	[OP_SUCCEEDED] = "succeeded",
	[OP_FAILED] = "failed",
};

static const char *const sess_names[SESS__COUNT] = {
	[SESS_CREATED] = "created",
	[SESS_RUNNING] = "running",
	[SESS_EXITED] = "exited",
	[SESS_FAILED] = "failed",
};

static const char *const sess_kind_names[SESS_KIND__COUNT] = {
	[SESS_KIND_PROCESS] = "process",
	[SESS_KIND_PTY] = "pty",
	[SESS_KIND_FILE] = "file",
	[SESS_KIND_WATCH] = "watch",
};

static const char *const op_kind_names[OPK__COUNT] = {
	[OPK_CREATE] = "create",   [OPK_DELETE] = "delete",   [OPK_PAUSE] = "pause",
	[OPK_RESUME] = "resume",   [OPK_SUSPEND] = "suspend", [OPK_RESTORE] = "restore",
	[OPK_STOP] = "stop",       [OPK_START] = "start",     [OPK_FORK] = "fork",
	[OPK_SNAPSHOT] = "snapshot", [OPK_BUILD] = "build",
};

static const char *const start_kind_names[START__COUNT] = {
	[START_BOOT] = "boot", [START_CLONE] = "clone", [START_POOL] = "pool", [START_FORK] = "fork",
};

static const char *const on_timeout_names[ON_TIMEOUT__COUNT] = {
	[ON_TIMEOUT_DELETE] = "delete", [ON_TIMEOUT_SUSPEND] = "suspend", [ON_TIMEOUT_SUSPEND_IDLE] = "suspend_idle",
};

static const char *const role_names[ROLE__COUNT] = {
	[ROLE_USER] = "user", [ROLE_POOL] = "pool", [ROLE_BUILDER] = "builder", [ROLE_BUILD] = "build",
};

static const char *const snap_kind_names[SNAP__COUNT] = {
	[SNAP_READY] = "ready", [SNAP_NAMED] = "named", [SNAP_SUSPEND] = "suspend", [SNAP_FORK] = "fork",
};

static const char *const snap_state_names[SNAPS__COUNT] = {
	[SNAPS_CREATING] = "creating", [SNAPS_READY] = "ready", [SNAPS_FAILED] = "failed",
};

static int parse_name(const char *const *names, int n, const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

const char *sb_state_name(enum sb_state s)
{
	return (unsigned)s < SB__COUNT ? sb_names[s] : "unknown";
}

int sb_state_parse(const char *name)
{
	return parse_name(sb_names, SB__COUNT, name);
}

const char *op_state_name(enum op_state s)
{
	return (unsigned)s < OP__COUNT ? op_names[s] : "unknown";
}

int op_state_parse(const char *name)
{
	return parse_name(op_names, OP__COUNT, name);
}

bool op_state_done(enum op_state s)
{
	return s == OP_SUCCEEDED || s == OP_FAILED;
}

#define NAME_FNS(prefix, type, names, count)                                 \
	const char *prefix##_name(type v)                                   \
	{                                                                   \
		return (unsigned)v < (count) ? names[v] : "unknown";        \
	}                                                                   \
	int prefix##_parse(const char *name)                                \
	{                                                                   \
		return parse_name(names, (count), name);                    \
	}

NAME_FNS(op_kind, enum op_kind, op_kind_names, OPK__COUNT)
NAME_FNS(start_kind, enum start_kind, start_kind_names, START__COUNT)
NAME_FNS(on_timeout, enum on_timeout, on_timeout_names, ON_TIMEOUT__COUNT)
NAME_FNS(sb_role, enum sb_role, role_names, ROLE__COUNT)
NAME_FNS(snap_kind, enum snap_kind, snap_kind_names, SNAP__COUNT)
NAME_FNS(snap_state, enum snap_state, snap_state_names, SNAPS__COUNT)

const char *sess_state_name(enum sess_state s)
{
	return (unsigned)s < SESS__COUNT ? sess_names[s] : "unknown";
}

int sess_state_parse(const char *name)
{
	return parse_name(sess_names, SESS__COUNT, name);
}

const char *sess_kind_name(enum sess_kind k)
{
	return (unsigned)k < SESS_KIND__COUNT ? sess_kind_names[k] : "unknown";
}

int sess_kind_parse(const char *name)
{
	return parse_name(sess_kind_names, SESS_KIND__COUNT, name);
}

/*
 * The sandbox state machine (docs/design/state.md has it as a table).  Each
 * verb is an "-ing" state entered when the action starts and left when it
 * ends, so a crash mid-action leaves a record saying what was under way.
 *
 * Rules that hold across the table:
 *  - deleted is terminal; delete may start from any other state except
 *    deleting itself (a second delete is a conflict, not a transition);
 *  - failed is reachable from every state in which a QEMU process exists or
 *    an action is under way (its process can die, its action can fail), and
 *    failed only leads to deleting;
 *  - an aborted pause or suspend returns to where it started (the VM kept
 *    running), so no sandbox is failed just because a snapshot could not be
 *    written;
 *  - staying in the same state is not a transition.
 */
#define T(s) (1u << (s))
static const unsigned sb_next[SB__COUNT] = {
	/* creating is also where start boots a stopped sandbox: a failed start
	 * leaves it stopped, disk kept */
	[SB_CREATING] = T(SB_RUNNING) | T(SB_STOPPED) | T(SB_DELETING) | T(SB_FAILED),
	[SB_RUNNING] = T(SB_PAUSING) | T(SB_SUSPENDING) | T(SB_STOPPING) | T(SB_DELETING) |
		       T(SB_FAILED),
	[SB_PAUSING] = T(SB_PAUSED) | T(SB_RUNNING) | T(SB_DELETING) | T(SB_FAILED),
	/* resume is one QMP "cont": no resuming state */
	[SB_PAUSED] = T(SB_RUNNING) | T(SB_SUSPENDING) | T(SB_STOPPING) | T(SB_DELETING) |
		      T(SB_FAILED),
	[SB_SUSPENDING] = T(SB_SUSPENDED) | T(SB_RUNNING) | T(SB_PAUSED) | T(SB_DELETING) |
			  T(SB_FAILED),
	/* no VM: nothing can fail until restore; stop discards the saved state */
	[SB_SUSPENDED] = T(SB_RESTORING) | T(SB_STOPPING) | T(SB_DELETING),
	/* a restore that fails keeps the saved state: suspended again */
	[SB_RESTORING] = T(SB_RUNNING) | T(SB_SUSPENDED) | T(SB_DELETING) | T(SB_FAILED),
	/* a stop that could not reach the guest returns to where it started */
	[SB_STOPPING] = T(SB_STOPPED) | T(SB_RUNNING) | T(SB_PAUSED) | T(SB_SUSPENDED) | T(SB_DELETING) |
			T(SB_FAILED),
	/* start boots the kept disk again: the same path as a first boot */
	[SB_STOPPED] = T(SB_CREATING) | T(SB_DELETING),
	[SB_DELETING] = T(SB_DELETED) | T(SB_FAILED),
	[SB_DELETED] = 0,
	[SB_FAILED] = T(SB_DELETING),
	/* its node is gone: only delete (which frees what is left of it) */
	[SB_LOST] = T(SB_DELETING),
};
#undef T

bool sb_transition_ok(enum sb_state from, enum sb_state to)
{
	if ((unsigned)from >= SB__COUNT || (unsigned)to >= SB__COUNT)
		return false;
	return (sb_next[from] >> to) & 1u;
}

/* Deleting is listed: its QEMU exists until the delete has killed it, and a
 * restarted daemon must look for it to finish the job. */
bool sb_state_has_vm(enum sb_state s)
{
	switch (s) {
	case SB_CREATING:
	case SB_RUNNING:
	case SB_PAUSING:
	case SB_PAUSED:
	case SB_SUSPENDING:
	case SB_RESTORING:
	case SB_STOPPING:
	case SB_DELETING:
		return true;
	case SB_SUSPENDED:
	case SB_STOPPED:
	case SB_DELETED:
	case SB_FAILED:
	case SB_LOST:
	case SB__COUNT:
		break;
	}
	return false;
}

void template_rec_copy(struct template_rec *dst, const struct template_rec *src)
{
	*dst = *src;
	dst->tags = json_deep_copy(src->tags);
	dst->env = json_deep_copy(src->env);
	dst->network = json_deep_copy(src->network);
	dst->config = json_deep_copy(src->config);
}

void template_rec_clear(struct template_rec *t)
{
	if (!t)
		return;
	json_decref(t->tags);
	json_decref(t->env);
	json_decref(t->network);
	json_decref(t->config);
	t->config = NULL;
	t->tags = NULL;
	t->env = NULL;
	t->network = NULL;
}

void sandbox_rec_clear(struct sandbox_rec *s)
{
	if (!s)
		return;
	json_decref(s->env);
	json_decref(s->metadata);
	json_decref(s->network);
	s->env = NULL;
	s->metadata = NULL;
	s->network = NULL;
}

void op_rec_clear(struct op_rec *op)
{
	if (!op)
		return;
	json_decref(op->result);
	op->result = NULL;
}

void snapshot_rec_clear(struct snapshot_rec *s)
{
	if (!s)
		return;
	json_decref(s->env);
	s->env = NULL;
}

void session_rec_clear(struct session_rec *s)
{
	if (!s)
		return;
	json_decref(s->argv);
	json_decref(s->env);
	s->argv = NULL;
	s->env = NULL;
}

#define ID_HEX 16

static void random_bytes(unsigned char *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = getrandom(buf + got, len - got, 0);
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		break;
	}
	if (got == len)
		return;
	/* getrandom(2) missing (ENOSYS under an old seccomp profile): the device */
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	while (fd >= 0 && got < len) {
		ssize_t n = read(fd, buf + got, len - got);
		if (n > 0)
			got += (size_t)n;
		else if (!(n < 0 && errno == EINTR))
			break;
	}
	if (fd >= 0)
		close(fd);
	/* Ids guard against guessing and collisions; a predictable one is
	 * worse than stopping. */
	if (got < len)
		abort();
}

void id_new(char out[ID_LEN], const char *prefix)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[ID_HEX / 2];
	size_t plen = strlen(prefix);

	if (plen > ID_LEN - ID_HEX - 1)
		plen = ID_LEN - ID_HEX - 1;
	memcpy(out, prefix, plen);
	random_bytes(raw, sizeof(raw));
	for (size_t i = 0; i < sizeof(raw); i++) {
		out[plen + 2 * i] = hex[raw[i] >> 4];
		out[plen + 2 * i + 1] = hex[raw[i] & 0xf];
	}
	out[plen + ID_HEX] = '\0';
}

bool id_valid(const char *s, const char *prefix)
{
	size_t plen;

	if (!s || !prefix)
		return false;
	plen = strlen(prefix);
	if (strncmp(s, prefix, plen) != 0)
		return false;
	s += plen;
	for (int i = 0; i < ID_HEX; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false; /* also stops at a NUL before 16 chars */
	return s[ID_HEX] == '\0';
}

int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void fmt_time(char out[32], int64_t ms)
{
	/* floor division, so times before 1970 still print a 0..999 fraction */
	int64_t sec = ms / 1000, frac = ms % 1000;
	char date[24];
	struct tm tm;
	time_t t;

	if (frac < 0) {
		frac += 1000;
		sec -= 1;
	}
	t = (time_t)sec;
	if (!gmtime_r(&t, &tm) || !strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm)) {
		snprintf(out, 32, "1970-01-01T00:00:00.000Z");
		return;
	}
	snprintf(out, 32, "%s.%03dZ", date, (int)frac);
}
