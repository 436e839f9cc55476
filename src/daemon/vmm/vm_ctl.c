/* vm_ctl.c -- controlling a running QEMU over QMP: pause, resume, freeze the disk, save memory
 * and devices through space-memcvt, restore an incoming state, and queries.
 *
 * Snapshots use migration with the capability x-ignore-shared. A saving QEMU
 * still sends every page of its RAM (its RAM block is not a shared mapping),
 * and space-memcvt splits that stream into a memory image and a device state
 * without the pages; a QEMU that maps the image (share=off) and sets the same
 * capability loads the state in milliseconds. See docs/design/snapshots-memcvt.md. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "jail.h"
#include "qcow2.h"
#include "log.h"
#include "proc.h"
#include "vm_argv.h"
#include "vm_internal.h"

/* Nothing in a snapshot is throttled: the VM is paused, and QEMU's default
 * (128 MiB/s) would make a 200 MiB save take seconds. */
#define SAVE_BANDWIDTH (64ll << 30)
/* The converter's pipe: large writes, fewer wake-ups. */
#define SAVE_PIPE_BYTES (1 << 20)

/* ---- calls ---- */

struct vm_call *vm_call_new(struct vm *vm, vm_done_cb done, vm_str_cb str, void *arg)
{
	struct vm_call *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->vm = vm;
	c->done = done;
	c->str = str;
	c->arg = arg;
	c->next = vm->calls;
	vm->calls = c;
	return c;
}

static void call_unlink(struct vm_call *c)
{
	for (struct vm_call **pp = &c->vm->calls; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			return;
		}
	}
}

void vm_call_finish(struct vm_call *c, const space_err *err, const char *value)
{
	struct vm *vm = c->vm;

	call_unlink(c);
	if (!c->cancelled) {
		vm->depth++;
		if (c->done)
			c->done(vm, err, c->arg);
		else if (c->str)
			c->str(vm, value, err, c->arg);
		vm->depth--;
	}
	free(c);
}

static void saving_free(struct vm *vm);

void vm_calls_abort(struct vm *vm, const char *why, bool report)
{
	space_err e = { 0 };

	err_set(&e, ESRCH, "vm %s: %s", vm->id, why);
	saving_free(vm);
	while (vm->calls) {
		struct vm_call *c = vm->calls;

		if (!report)
			c->cancelled = true;
		vm_call_finish(c, &e, NULL);
	}
}

void vm_forget(struct vm *vm, void *arg)
{
	if (!vm)
		return;
	for (struct vm_call *c = vm->calls; c; c = c->next)
		if (c->arg == arg)
			c->cancelled = true;
}

/* A QMP reply completing a call: success, or QEMU's error. */
static void on_reply(json_t *reply, const char *error, void *arg)
{
	struct vm_call *c = arg;
	space_err e = { 0 };

	(void)reply;
	if (error)
		err_set(&e, EIO, "%s", error);
	vm_call_finish(c, error ? &e : NULL, NULL);
}

/* Sends `command`; `on` gets its reply and completes a new call (done or
 * str, with arg). */
static int call(struct vm *vm, const char *command, json_t *args, qmp_reply_cb on, vm_done_cb done,
		vm_str_cb str, void *arg, space_err *err)
{
	struct vm_call *c = vm_call_new(vm, done, str, arg);

	if (!c) {
		json_decref(args);
		return err_set(err, ENOMEM, "out of memory");
	}
	if (vm_qmp(vm, command, args, on, c, err) < 0) {
		c->cancelled = true;
		vm_call_finish(c, NULL, NULL);
		return -1;
	}
	return 0;
}

static int simple(struct vm *vm, const char *command, json_t *args, vm_done_cb cb, void *arg,
		  space_err *err)
{
	return call(vm, command, args, on_reply, cb, NULL, arg, err);
}

int vm_pause(struct vm *vm, vm_done_cb cb, void *arg, space_err *err)
{
	return simple(vm, "stop", NULL, cb, arg, err);
}

int vm_resume(struct vm *vm, vm_done_cb cb, void *arg, space_err *err)
{
	return simple(vm, "cont", NULL, cb, arg, err);
}

/* The new top layer, before QEMU creates its qcow2 over it: an empty file
 * of the VM's uid, 0600, bound into the jail at its host path (QEMU cannot
 * create files in the jail, whose directories are root's). */
static int freeze_prepare_jail(struct vm *vm, const char *new_top, space_err *err)
{
	_cleanup_close_ int fd = open(new_top, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		return err_sys(err, errno, "create %s", new_top);
	if (fchown(fd, vm->uid, vm->gid) < 0) {
		int e = errno;
		unlink(new_top);
		return err_sys(err, e, "chown %s", new_top);
	}
	if (jail_bind_file(vm->jail_dir, new_top, true, err) < 0) {
		unlink(new_top);
		return -1;
	}
	return 0;
}

static void on_frozen(json_t *reply, const char *error, void *arg)
{
	struct vm_call *c = arg;
	struct vm *vm = c->vm;
	space_err e = { 0 };

	(void)reply;
	if (error) {
		err_set(&e, EIO, "%s", error);
		vm->frozen[0] = '\0';
		vm_call_finish(c, &e, NULL);
		return;
	}
	/* The new layer's backing file, as we know it: chains are followed
	 * by this record, not by headers a QEMU wrote (qcow2.h). */
	if (qcow2_backing_record(vm->frozen, vm->disk, &e) < 0) {
		log_warn("vm %s: %s", vm->id, e.msg);
		err_clear(&e);
	}
	/* The old top is a read-only layer now: root's again, readable by
	 * the jailed QEMUs of forks and clones whose chains reach it. */
	if (vm->jailed && jail_release_layer(vm->disk, &e) < 0)
		log_warn("vm %s: %s", vm->id, e.msg);
	snprintf(vm->disk, sizeof(vm->disk), "%s", vm->frozen);
	vm->frozen[0] = '\0';
	vm_call_finish(c, NULL, NULL);
}

int vm_freeze_disk(struct vm *vm, const char *new_top, vm_done_cb cb, void *arg, space_err *err)
{
	if (strlen(new_top) >= sizeof(vm->frozen))
		return err_set(err, ENAMETOOLONG, "path too long: %s", new_top);
	if (vm->jailed && vm->jail_dir[0] && freeze_prepare_jail(vm, new_top, err) < 0)
		return err_wrap(err, "vm %s: the new disk layer", vm->id);
	json_t *args = json_pack("{s:s, s:s, s:s, s:s}", "device", "root", "snapshot-file", new_top,
				 "format", "qcow2", "mode", "absolute-paths");

	if (!args)
		return err_set(err, ENOMEM, "out of memory");
	snprintf(vm->frozen, sizeof(vm->frozen), "%s", new_top);
	return call(vm, "blockdev-snapshot-sync", args, on_frozen, cb, NULL, arg, err);
}

/* ---- queries ---- */

static void on_status(json_t *reply, const char *error, void *arg)
{
	struct vm_call *c = arg;
	space_err e = { 0 };
	const char *st = json_string_value(json_object_get(reply, "status"));

	if (error || !st) {
		err_set(&e, EIO, "query-status: %s", error ? error : "no status in the reply");
		vm_call_finish(c, &e, NULL);
		return;
	}
	vm_call_finish(c, NULL, st);
}

static void on_block(json_t *reply, const char *error, void *arg)
{
	struct vm_call *c = arg;
	space_err e = { 0 };
	size_t i;
	json_t *dev;

	if (error) {
		err_set(&e, EIO, "query-block: %s", error);
		vm_call_finish(c, &e, NULL);
		return;
	}
	json_array_foreach(reply, i, dev) {
		const char *name = json_string_value(json_object_get(dev, "device"));
		const char *file = json_string_value(json_object_get(json_object_get(dev, "inserted"), "file"));

		if (name && file && strcmp(name, "root") == 0) {
			vm_call_finish(c, NULL, file);
			return;
		}
	}
	err_set(&e, EIO, "query-block: no root disk");
	vm_call_finish(c, &e, NULL);
}

int vm_status(struct vm *vm, vm_str_cb cb, void *arg, space_err *err)
{
	return call(vm, "query-status", NULL, on_status, NULL, cb, arg, err);
}

int vm_disk_top(struct vm *vm, vm_str_cb cb, void *arg, space_err *err)
{
	return call(vm, "query-block", NULL, on_block, NULL, cb, arg, err);
}

/* ---- migration settings shared by saving and restoring ---- */

static json_t *snapshot_caps(void)
{
	return json_pack("{s:[{s:s,s:b},{s:s,s:b}]}", "capabilities", "capability", "x-ignore-shared",
			 "state", 1, "capability", "events", "state", 1);
}

/* A setup reply: only failures matter (they end the save or the launch). */
static void on_setup_reply(json_t *reply, const char *error, void *arg);

/* One QMP command of a sequence; fd (or -1) goes along with it. */
struct step {
	const char *command;
	json_t *args;
	int fd;
};

/* Sends the steps in order, all answered by `on`. Every step's args and fd
 * are consumed, also those after a failure. */
static int send_steps(struct vm *vm, struct step *steps, size_t n, qmp_reply_cb on, space_err *err)
{
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		if (rc == 0 && !steps[i].args)
			rc = err_set(err, ENOMEM, "out of memory");
		if (rc == 0) {
			rc = qmp_send_fd(vm->qmp, steps[i].command, steps[i].args, steps[i].fd, on, vm, err);
			continue;
		}
		json_decref(steps[i].args);
		if (steps[i].fd >= 0)
			close(steps[i].fd);
	}
	return rc;
}

/* ---- restoring (vm_launch with an incoming state) ---- */

static void on_cont(json_t *reply, const char *error, void *arg)
{
	struct vm *vm = arg;

	if (!error)
		vm_launch_done(vm);
	else if (reply)
		vm_launch_fail(vm, "would not run the restored guest");
}

static void on_incoming_reply(json_t *reply, const char *error, void *arg)
{
	struct vm *vm = arg;
	char why[300];

	/* Without a reply QEMU is ending: its exit tells the story. */
	if (!error || !reply)
		return;
	snprintf(why, sizeof(why), "refused the snapshot state (%s)", error);
	vm_launch_fail(vm, why);
}

int vm_ctl_incoming(struct vm *vm, space_err *err)
{
	/* Queued in order; QEMU answers them after its greeting. The load
	 * itself ends with a MIGRATION event (vm_ctl_event). */
	struct step steps[] = {
		{ "migrate-set-capabilities", snapshot_caps(), -1 },
		{ "getfd", json_pack("{s:s}", "fdname", VM_FD_MIGRATION), steal_fd(&vm->incoming_fd) },
		{ "migrate-incoming", json_pack("{s:s}", "uri", "fd:" VM_FD_MIGRATION), -1 },
	};

	return send_steps(vm, steps, sizeof(steps) / sizeof(steps[0]), on_incoming_reply, err);
}

/* ---- saving ---- */

static void saving_free(struct vm *vm)
{
	struct vm_saving *s = vm->saving;

	if (!s)
		return;
	vm->saving = NULL;
	if (s->exit_ev)
		event_free(s->exit_ev);
	if (s->pidfd >= 0) {
		/* Still running: it must not outlive the save it belonged to. */
		proc_kill_reap(s->pid, s->pidfd);
		close(s->pidfd);
	}
	if (s->out_fd >= 0)
		close(s->out_fd);
	if (s->spawn_fd >= 0)
		close(s->spawn_fd);
	free(s);
}

/* Finishes the save once both halves are in, or at the first failure. */
static void save_settle(struct vm *vm)
{
	struct vm_saving *s = vm->saving;
	struct vm_call *c;
	space_err e = { 0 };

	if (!s || (!s->why[0] && !(s->migrated && s->converted)))
		return;
	c = s->call;
	if (s->why[0]) {
		/* The converter may still read: stop QEMU sending first. */
		if (qmp_is_open(vm->qmp))
			qmp_send(vm->qmp, "migrate_cancel", NULL, NULL, NULL, &e);
		err_clear(&e);
		err_set(&e, EIO, "saving the snapshot: %s", s->why);
	} else {
		log_info("vm %s: memory and devices saved in %lld ms", vm->id,
			 (long long)(mono_ms() - s->t0));
	}
	saving_free(vm);
	vm_call_finish(c, e.code ? &e : NULL, NULL);
}

static void save_failed(struct vm *vm, const char *what, const char *detail)
{
	struct vm_saving *s = vm->saving;

	if (s && !s->why[0])
		snprintf(s->why, sizeof(s->why), "%s: %s", what, detail);
	save_settle(vm);
}

static void on_setup_reply(json_t *reply, const char *error, void *arg)
{
	struct vm *vm = arg;

	(void)reply;
	if (error)
		save_failed(vm, "QEMU", error);
}

/* What the converter printed: its summary, or why it failed. */
static void read_output(int fd, char *buf, size_t len)
{
	size_t have = 0;
	ssize_t n;

	while (have < len - 1 && (n = read(fd, buf + have, len - 1 - have)) > 0)
		have += (size_t)n;
	while (have && (buf[have - 1] == '\n' || buf[have - 1] == '\r'))
		have--;
	buf[have] = '\0';
}

static void on_converter_exit(evutil_socket_t fd, short what, void *arg)
{
	struct vm *vm = arg;
	struct vm_saving *s = vm->saving;
	char out[400], how[64];
	int status = 0;

	(void)fd;
	(void)what;
	if (!s)
		return;
	while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
		;
	close(s->pidfd);
	s->pidfd = -1;
	proc_spawn_failure(s->spawn_fd, out, sizeof(out));
	if (!out[0])
		read_output(s->out_fd, out, sizeof(out));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		log_debug("vm %s: space-memcvt: %s", vm->id, out);
		s->converted = true;
		save_settle(vm);
		return;
	}
	proc_status_text(status, how, sizeof(how));
	snprintf(s->why, sizeof(s->why), "space-memcvt %s: %s", how, out[0] ? out : "(no output)");
	save_settle(vm);
}

/* The converter: stream on its stdin, image and state as fds 3 and 4,
 * stdout and stderr into a pipe we read when it exits. It parses what a
 * possibly compromised QEMU wrote, so a jailed VM's converter runs in that
 * VM's jail (same uid: the stream is that VM's own data), in a network
 * namespace of its own, with an empty environment and the seccomp filter;
 * it needs nothing but its descriptors. */
static int spawn_converter(struct vm *vm, struct vm_saving *s, int stream_fd, int image_fd, int state_fd,
			   space_err *err)
{
	int out[2];
	int pass[2] = { image_fd, state_fd };
	char bin[PATH_MAX];

	if (proc_which(vm_memcvt_binary(), bin, sizeof(bin)) < 0)
		return err_sys(err, errno, "finding %s", vm_memcvt_binary());
	char *argv[] = { bin, NULL };
	_cleanup_close_ int xfd = vm->jailed ? open(bin, O_PATH | O_CLOEXEC) : -1;
	if (vm->jailed && xfd < 0)
		return err_sys(err, errno, "open %s", bin);
	if (pipe2(out, O_CLOEXEC | O_NONBLOCK) < 0)
		return err_sys(err, errno, "pipe");
	struct spawn_opts o = {
		.argv = argv,
		.stdin_fd = stream_fd,
		.stdout_fd = out[1],
		.stderr_fd = out[1],
		.pass_fds = pass,
		.npass = 2,
		.exec_fd = xfd,
	};
	if (vm->jailed) {
		o.netns = true;
		o.jail_root = vm->jail_dir;
		o.uid = vm->uid;
		o.gid = vm->gid;
		o.seccomp = true;
		o.clear_env = true;
	}
	int rc = proc_spawn_async(&o, &s->pid, &s->pidfd, &s->spawn_fd, err);
	close(out[1]);
	if (rc < 0) {
		close(out[0]);
		return err_wrap(err, "starting %s", argv[0]);
	}
	s->out_fd = out[0];
	return 0;
}

int vm_save(struct vm *vm, int image_fd, int state_fd, vm_done_cb cb, void *arg, space_err *err)
{
	_cleanup_close_ int img = image_fd, st = state_fd;
	_cleanup_close_ int rd = -1, wr = -1;
	int p[2];

	if (vm->saving)
		return err_set(err, EBUSY, "vm %s: a save is already running", vm->id);
	if (vm->exited || !qmp_is_open(vm->qmp))
		return err_set(err, ESRCH, "vm %s: QEMU is not running", vm->id);
	if (pipe2(p, O_CLOEXEC) < 0)
		return err_sys(err, errno, "pipe");
	rd = p[0];
	wr = p[1];
	fcntl(wr, F_SETPIPE_SZ, SAVE_PIPE_BYTES);
	struct vm_saving *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(err, ENOMEM, "out of memory");
	s->pidfd = -1;
	s->out_fd = -1;
	s->spawn_fd = -1;
	s->t0 = mono_ms();
	vm->saving = s;
	if (spawn_converter(vm, s, rd, img, st, err) < 0)
		goto fail;
	s->exit_ev = event_new(vm->base, s->pidfd, EV_READ, on_converter_exit, vm);
	s->call = vm_call_new(vm, cb, NULL, arg);
	if (!s->exit_ev || !s->call || event_add(s->exit_ev, NULL) < 0) {
		err_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	/* Our copies of the pipe close here: the converter sees EOF when QEMU
	 * is done with its end. */
	struct step steps[] = {
		{ "migrate-set-capabilities", snapshot_caps(), -1 },
		{ "migrate-set-parameters",
		  json_pack("{s:I, s:I}", "max-bandwidth", (json_int_t)SAVE_BANDWIDTH, "downtime-limit",
			    (json_int_t)2000),
		  -1 },
		{ "getfd", json_pack("{s:s}", "fdname", VM_FD_MIGRATION), steal_fd(&wr) },
		{ "migrate", json_pack("{s:s}", "uri", "fd:" VM_FD_MIGRATION), -1 },
	};
	if (send_steps(vm, steps, sizeof(steps) / sizeof(steps[0]), on_setup_reply, err) < 0)
		goto fail;
	return 0;
fail:
	if (s->call) {
		s->call->cancelled = true;
		vm_call_finish(s->call, NULL, NULL);
		s->call = NULL;
	}
	saving_free(vm);
	return -1;
}

/* ---- events ---- */

static void on_migrate_info(json_t *reply, const char *error, void *arg)
{
	struct vm *vm = arg;
	const char *desc = json_string_value(json_object_get(reply, "error-desc"));

	save_failed(vm, "migration failed", error ? error : desc ? desc : "(QEMU gave no reason)");
}

void vm_ctl_event(struct vm *vm, const char *event, json_t *data)
{
	const char *status = json_string_value(json_object_get(data, "status"));
	space_err e = { 0 };

	if (strcmp(event, "MIGRATION") != 0 || !status)
		return;
	if (!vm->ready) {
		/* Restoring: the state is loaded, the vCPUs wait for cont. */
		if (strcmp(status, "completed") == 0 && vm_qmp(vm, "cont", NULL, on_cont, vm, &e) < 0)
			vm_launch_fail(vm, "could not be continued");
		else if (strcmp(status, "failed") == 0)
			vm_launch_fail(vm, "could not load the snapshot state");
		return;
	}
	if (!vm->saving)
		return;
	if (strcmp(status, "completed") == 0) {
		vm->saving->migrated = true;
		save_settle(vm);
	} else if (strcmp(status, "failed") == 0 || strcmp(status, "cancelled") == 0) {
		if (vm_qmp(vm, "query-migrate", NULL, on_migrate_info, vm, &e) < 0)
			save_failed(vm, "migration", status);
	}
}
