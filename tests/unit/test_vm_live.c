/* test_vm_live.c -- real QEMU: launch (asynchronous), console, QMP, kill, external SIGKILL,
 * adopt, pause/resume, a snapshot (disk freeze + memory through space-memcvt) and a clone
 * started from it, files. Needs the guest kernel and the minimal template (or
 * SPACE_TEST_KERNEL / SPACE_TEST_IMAGE) and build/bin/space-memcvt; skipped (77) without them.
 * Runs under TCG (several seconds). */
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/vmm/cgroup.h"
#include "daemon/vmm/jail.h"
#include "daemon/vmm/proc.h"
#include "daemon/vmm/qcow2.h"
#include "daemon/vmm/vm.h"
#include "harness.h"

static struct event_base *base;
static int exits, readies;
static char reason[256];
static bool got_reply, done_flag, done_ok;
static char reply_status[32], done_msg[512];
static bool free_in_cb;

static void on_ready_cb(struct vm *vm, void *arg)
{
	(void)vm;
	(void)arg;
	readies++;
}

static void on_exit_cb(struct vm *vm, const char *why, void *arg)
{
	(void)arg;
	exits++;
	/* sandbox's pattern: free first, then use `why` (valid for the call). */
	if (free_in_cb)
		vm_free(vm);
	snprintf(reason, sizeof(reason), "%s", why);
}

static const struct vm_events events = { .ready = on_ready_cb, .exited = on_exit_cb };

static void on_status(json_t *reply, const char *error, void *arg)
{
	(void)arg;
	got_reply = true;
	snprintf(reply_status, sizeof(reply_status), "%s",
		 error ? "error" : json_string_value(json_object_get(reply, "status")));
}

static void on_done(struct vm *vm, const space_err *err, void *arg)
{
	(void)vm;
	(void)arg;
	done_flag = true;
	done_ok = !err;
	snprintf(done_msg, sizeof(done_msg), "%s", err ? err->msg : "");
}

/* Runs the loop until cond() or timeout_ms. */
static bool run_until(bool (*cond)(void), int timeout_ms)
{
	int64_t end = mono_ms() + timeout_ms;
	struct timeval tick = { 0, 20000 };

	while (!cond() && mono_ms() < end) {
		event_base_loopexit(base, &tick);
		event_base_dispatch(base);
	}
	return cond();
}

static char console_path[300];
static bool console_has(const char *what)
{
	char buf[16384] = "";
	FILE *f = fopen(console_path, "r");

	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return strstr(buf, what) != NULL;
}
static bool console_has_kernel(void)
{
	return console_has("Linux version");
}
static bool agent_started(void)
{
	return console_has("space-agent") && console_has("system ready");
}
static bool exited(void)
{
	return exits > 0;
}
static bool ready(void)
{
	return readies > 0;
}
static bool replied(void)
{
	return got_reply;
}
static bool done(void)
{
	return done_flag;
}

static bool status_is(struct vm *vm, const char *want)
{
	space_err err = { 0 };

	got_reply = false;
	if (vm_qmp(vm, "query-status", NULL, on_status, NULL, &err) < 0)
		return false;
	return run_until(replied, 5000) && strcmp(reply_status, want) == 0;
}

static int qemu_img(const char *backing, const char *out)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "qemu-img create -q -f qcow2 -F raw -b %s %s", backing, out);
	return system(cmd);
}

static struct vm_spec spec;
static char cgscope[64];
static char dir[] = "/tmp/test_vm_live.XXXXXX", run[128], sock[128], disk[160];

static void test_launch_kill_adopt(void)
{
	space_err err = { 0 };
	struct vm *vm = NULL;

	/* 1. launch: it returns at once; `ready` follows */
	int64_t t0 = mono_ms();
	CHECK(vm_launch(base, &spec, 30000, &events, NULL, &vm, &err) == 0, "vm_launch (%s)", err.msg);
	if (!vm)
		return;
	NOTE("launch returned after %lld ms", (long long)(mono_ms() - t0));
	CHECK(run_until(ready, 10000) && readies == 1, "ready once QMP answers (%lld ms)",
	      (long long)(mono_ms() - t0));
	CHECK(vm_pid(vm) > 0 && vm_pid_start(vm) == proc_start_time(vm_pid(vm)), "pid and start time");
	struct stat st;
	CHECK(stat(vm_agent_path(vm), &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0600,
	      "agent socket exists, mode 0600");
	struct vm *again = NULL;
	CHECK(vm_launch(base, &spec, 30000, &events, NULL, &again, &err) < 0 && err.code == EEXIST,
	      "second launch of a running sandbox refused");
	CHECK(status_is(vm, "running"), "query-status: running");
	CHECK(run_until(console_has_kernel, 20000), "kernel output in console.log");
	vm_kill(vm);
	CHECK(run_until(exited, 5000) && exits == 1, "exit callback after vm_kill: %s", reason);
	CHECK(strcmp(reason, "exited with status 0") == 0, "quit over QMP: exit status 0 (%s)", reason);
	CHECK(vm_qmp(vm, "query-status", NULL, NULL, NULL, &err) < 0 && err.code == ESRCH, "vm_qmp after exit fails");
	vm_free(vm);

	/* 2. killed from outside; the callback frees the vm */
	exits = 0;
	readies = 0;
	free_in_cb = true;
	CHECK(vm_launch(base, &spec, 30000, &events, NULL, &vm, &err) == 0, "relaunch (%s)", err.msg);
	if (!vm)
		return;
	run_until(ready, 10000);
	kill(vm_pid(vm), SIGKILL);
	CHECK(run_until(exited, 5000) && strcmp(reason, "killed by signal 9") == 0, "external SIGKILL reported: %s",
	      reason);
	free_in_cb = false;

	/* 2b. a QEMU that refuses its arguments: `exited` says what it said */
	exits = 0;
	struct vm_spec bad = spec;
	bad.memory_mib = 1024 * 1024; /* more than this host has */
	if (vm_launch(base, &bad, 30000, &events, NULL, &vm, &err) == 0) {
		CHECK(run_until(exited, 10000) && strstr(reason, "during start-up"),
		      "a QEMU that fails to start: %s", reason);
		vm_free(vm);
	} else {
		CHECK(1, "a QEMU that fails to start is refused at once: %s", err.msg);
	}

	/* 2c. no QEMU binary at all: the launch returns at once, `exited` says why */
	exits = 0;
	setenv("SPACE_QEMU", "/nonexistent/qemu-system-x86_64", 1);
	CHECK(vm_launch(base, &spec, 30000, &events, NULL, &vm, &err) == 0, "a launch does not wait for exec");
	unsetenv("SPACE_QEMU");
	if (vm) {
		CHECK(run_until(exited, 10000) && strstr(reason, "could not be started") && strstr(reason, "exec"),
		      "a QEMU that cannot be executed: %s", reason);
		vm_free(vm);
	}

	/* 3. adopt after a "restart": vm_free leaves QEMU running */
	exits = 0;
	readies = 0;
	CHECK(vm_launch(base, &spec, 30000, &events, NULL, &vm, &err) == 0, "launch for adoption (%s)", err.msg);
	if (!vm)
		return;
	run_until(ready, 10000);
	int pid = vm_pid(vm);
	uint64_t start = vm_pid_start(vm);
	vm_free(vm);
	vm = NULL;
	CHECK(kill(pid, 0) == 0, "vm_free leaves QEMU running");
	CHECK(vm_adopt(base, &spec, pid, start + 1, &events, NULL, &vm, &err) < 0 && err.code == ESRCH,
	      "adopt with a wrong start time refused");
	struct vm_spec other = spec;
	other.id = "sb-someone-else";
	CHECK(vm_adopt(base, &other, pid, start, &events, NULL, &vm, &err) < 0 && err.code == ESRCH,
	      "adopt as another sandbox refused");
	CHECK(vm_adopt(base, &spec, pid, start, &events, NULL, &vm, &err) == 0, "adopt (%s)", err.msg);
	if (!vm) {
		kill(pid, SIGKILL);
		return;
	}
	CHECK(status_is(vm, "running"), "adopted QMP answers");
	vm_kill(vm);
	CHECK(run_until(exited, 5000), "adopted VM killed: %s", reason);
	vm_free(vm);
}

/* Pause, resume, freeze the disk, save memory and devices, then a clone of
 * that snapshot starts and runs. */
static void test_snapshot_and_clone(void)
{
	char snapdir[200], top[200], image[220], state[220], seed[220];
	space_err err = { 0 };
	struct vm *vm = NULL, *clone = NULL;

	exits = readies = 0;
	snprintf(console_path, sizeof(console_path), "%s/console.log", run);
	unlink(console_path);
	CHECK(vm_launch(base, &spec, 30000, &events, NULL, &vm, &err) == 0, "launch (%s)", err.msg);
	if (!vm)
		return;
	CHECK(run_until(agent_started, 30000), "the guest agent started");

	done_flag = false;
	CHECK(vm_pause(vm, on_done, NULL, &err) == 0 && run_until(done, 5000) && done_ok && status_is(vm, "paused"),
	      "vm_pause: paused (%s)", done_msg);
	done_flag = false;
	CHECK(vm_resume(vm, on_done, NULL, &err) == 0 && run_until(done, 5000) && done_ok &&
		      status_is(vm, "running"),
	      "vm_resume: running (%s)", done_msg);

	snprintf(snapdir, sizeof(snapdir), "%s/snap", dir);
	mkdir(snapdir, 0700);
	snprintf(top, sizeof(top), "%s/top.qcow2", dir);
	done_flag = false;
	vm_pause(vm, on_done, NULL, &err);
	run_until(done, 5000);
	done_flag = false;
	CHECK(vm_freeze_disk(vm, top, on_done, NULL, &err) == 0 && run_until(done, 5000) && done_ok,
	      "vm_freeze_disk (%s)", done_msg);
	CHECK(access(top, R_OK) == 0, "QEMU made the new top layer");
	char recorded[4096];
	CHECK(qcow2_backing_recorded(top, recorded) == 1 && strcmp(recorded, disk) == 0,
	      "the new layer's backing file is recorded: %s", recorded);
	snprintf(image, sizeof(image), "%s/mem", snapdir);
	snprintf(state, sizeof(state), "%s/state", snapdir);
	int img = open(image, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int st = open(state, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	done_flag = false;
	int64_t t0 = mono_ms();
	CHECK(vm_save(vm, img, st, on_done, NULL, &err) == 0 && run_until(done, 30000) && done_ok,
	      "vm_save through space-memcvt (%s)", done_flag ? done_msg : err.msg);
	NOTE("saved in %lld ms", (long long)(mono_ms() - t0));
	/* stat first: the message's arguments may be evaluated before the condition. */
	struct stat sti = { 0 }, sts = { 0 };
	int ri = stat(image, &sti), rs = stat(state, &sts);
	CHECK(ri == 0 && sti.st_size == 128ll << 20 && sti.st_blocks * 512 < sti.st_size,
	      "the image is the guest's RAM size, sparse (%lld KiB allocated)", (long long)sti.st_blocks / 2);
	CHECK(rs == 0 && sts.st_size > 1000 && sts.st_size < (4 << 20),
	      "the device state is small (%lld bytes)", (long long)sts.st_size);
	done_flag = false;
	CHECK(vm_resume(vm, on_done, NULL, &err) == 0 && run_until(done, 5000) && done_ok &&
		      status_is(vm, "running"),
	      "the source runs again after its snapshot (%s)", done_msg);

	/* A clone: a copy of the empty top as its disk, the image mapped privately. */
	char clone_run[160], clone_sock[160], cmd[600];
	snprintf(seed, sizeof(seed), "%s/clone.qcow2", dir);
	snprintf(cmd, sizeof(cmd), "cp %s %s", top, seed);
	(void)qemu_img;
	CHECK(system(cmd) == 0, "the clone's disk");
	snprintf(clone_run, sizeof(clone_run), "%s/crun", dir);
	snprintf(clone_sock, sizeof(clone_sock), "%s/cs", dir);
	struct vm_spec cs = spec;
	cs.id = "sb-unit-clone";
	cs.run_dir = clone_run;
	cs.sock_dir = clone_sock;
	cs.disk = seed;
	cs.mem = VM_MEM_IMAGE;
	cs.mem_image = image;
	cs.incoming = state;
	char clone_jail[200];
	snprintf(clone_jail, sizeof(clone_jail), "%s/jail/sb-unit-clone", dir);
	if (cs.jail) {
		cs.jail_dir = clone_jail;
		cs.run_uid = cs.run_gid = spec.run_uid + 1;
	}
	readies = 0;
	t0 = mono_ms();
	CHECK(vm_launch(base, &cs, 30000, &events, NULL, &clone, &err) == 0, "launch a clone (%s)", err.msg);
	if (clone) {
		CHECK(run_until(ready, 15000), "the clone is ready in %lld ms", (long long)(mono_ms() - t0));
		CHECK(status_is(clone, "running"), "the clone runs");
		if (cs.jail)
			CHECK(proc_cmdline_has(vm_pid(clone), "-object",
					       "memory-backend-file,id=mem,size=128M,mem-path=/proc/self/fd/6") &&
				      jail_pid_has_uid(vm_pid(clone), cs.run_uid),
			      "the jailed clone maps the sealed image, as its own uid");
		exits = 0;
		vm_kill(clone);
		run_until(exited, 5000);
		vm_free(clone);
		vm_remove_files(&cs, &err);
	}
	exits = 0;
	vm_kill(vm);
	CHECK(run_until(exited, 5000), "source killed: %s", reason);
	vm_free(vm);
	vm_rm_tree(snapdir, &err);
	qcow2_backing_forget(top);
	unlink(top);
	unlink(seed);
}

/* The same VMs jailed (root only): own uid, mount namespace, seccomp,
 * cgroup leaf; adoption checks the uid; the jail and the leaf go with QEMU. */
static void test_jailed(void)
{
	char jail_dir[200], status[64], buf[4096];
	space_err err = { 0 };
	struct vm *vm = NULL;
	struct vm_cgroup cg;

	char kernel[4096];
	const char *plain_kernel = spec.kernel;
	if (!realpath(spec.kernel, kernel)) {
		CHECK(0, "realpath %s", spec.kernel);
		return;
	}
	spec.kernel = kernel;
	snprintf(jail_dir, sizeof(jail_dir), "%s/jail/sb-unit-live", dir);
	snprintf(cgscope, sizeof(cgscope), "space-unit-%d", (int)getpid());
	spec.jail = true;
	spec.run_uid = spec.run_gid = 2000000777u;
	spec.jail_dir = jail_dir;
	/* The chain: the disk in the temp dir, over the template image. */
	char imgdir[4096];
	const char *image = getenv("SPACE_TEST_IMAGE") ?: "build/templates/minimal/rootfs.ext4";
	if (!realpath(image, imgdir) || !strrchr(imgdir, '/')) {
		CHECK(0, "realpath %s", image);
		return;
	}
	*strrchr(imgdir, '/') = '\0';
	const char *layer_dirs[] = { dir, imgdir, NULL };
	spec.layer_dirs = layer_dirs;
	spec.cgroup_scope = cgscope;
	exits = readies = 0;
	CHECK(vm_launch(base, &spec, 30000, &events, NULL, &vm, &err) == 0, "jailed launch (%s)", err.msg);
	if (!vm)
		goto out;
	CHECK(run_until(ready, 10000), "a jailed QEMU answers QMP");
	int pid = vm_pid(vm);
	snprintf(status, sizeof(status), "/proc/%d/status", pid);
	FILE *f = fopen(status, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	buf[n] = '\0';
	if (f)
		fclose(f);
	CHECK(jail_pid_has_uid(pid, spec.run_uid) && strstr(buf, "CapEff:\t0000000000000000") &&
		      strstr(buf, "NoNewPrivs:\t1") && strstr(buf, "Seccomp:\t2"),
	      "it runs as its uid, no capabilities, nnp, seccomp");
	CHECK(cgroup_paths(cgscope, spec.id, &cg, &err) == 0 && access(cg.dir[0], F_OK) == 0,
	      "its cgroup leaf exists (%s)", cg.dir[0]);
	uint64_t start = vm_pid_start(vm);
	vm_free(vm);
	struct vm_spec wrong = spec;
	wrong.run_uid = wrong.run_gid = spec.run_uid + 5;
	CHECK(vm_adopt(base, &wrong, pid, start, &events, NULL, &vm, &err) < 0 && err.code == ESRCH &&
		      strstr(err.msg, "does not run as its uid"),
	      "adoption refuses a QEMU of another uid (%s)", err.msg);
	CHECK(vm_adopt(base, &spec, pid, start, &events, NULL, &vm, &err) == 0, "adoption as its uid (%s)", err.msg);
	if (!vm) {
		kill(pid, SIGKILL);
		goto out;
	}
	vm_kill(vm);
	CHECK(run_until(exited, 5000), "killed: %s", reason);
	vm_free(vm);
	CHECK(access(jail_dir, F_OK) < 0 && access(cg.dir[0], F_OK) < 0, "its jail and cgroup leaf are gone");
	test_snapshot_and_clone();
out:
	spec.kernel = plain_kernel;
	spec.layer_dirs = NULL;
	spec.jail = false;
	spec.run_uid = spec.run_gid = 0;
	spec.jail_dir = NULL;
	spec.cgroup_scope = NULL;
	if (cgroup_paths(cgscope, spec.id, &cg, &err) == 0)
		for (int i = 0; i < cg.n; i++) {
			rmdir(cg.dir[i]); /* the scope: <leaf>/.. */
			char *slash = strrchr(cg.dir[i], '/');
			*slash = '\0';
			rmdir(cg.dir[i]);
		}
	char jroot[200];
	snprintf(jroot, sizeof(jroot), "%s/jail", dir);
	rmdir(jroot);
}

int main(void)
{
	const char *kernel = getenv("SPACE_TEST_KERNEL") ?: "build/kernel/vmlinuz";
	const char *image = getenv("SPACE_TEST_IMAGE") ?: "build/templates/minimal/rootfs.ext4";
	char real[4096], cmd[8400];
	space_err err = { 0 };

	if (access(kernel, R_OK) < 0 || access(image, R_OK) < 0)
		SKIP_ALL("no guest kernel or minimal template (make kernel template-minimal)");
	if (access("/usr/bin/qemu-system-x86_64", X_OK) < 0 && !getenv("SPACE_QEMU"))
		SKIP_ALL("no qemu-system-x86_64");
	if (!getenv("SPACE_MEMCVT") && access("build/bin/space-memcvt", X_OK) == 0 && realpath("build/bin/space-memcvt", real))
		setenv("SPACE_MEMCVT", real, 1);
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir) || !realpath(image, real))
		SKIP_ALL("mkdtemp");
	snprintf(run, sizeof(run), "%s/run", dir);
	snprintf(sock, sizeof(sock), "%s/s", dir);
	snprintf(disk, sizeof(disk), "%s/disk.qcow2", dir);
	snprintf(console_path, sizeof(console_path), "%s/console.log", run);
	snprintf(cmd, sizeof(cmd), "qemu-img create -q -f qcow2 -F raw -b %s %s", real, disk);
	if (system(cmd) != 0)
		SKIP_ALL("qemu-img");
	spec = (struct vm_spec){
		.id = "sb-unit-live",
		.run_dir = run,
		.sock_dir = sock,
		.kernel = kernel,
		.disk = disk,
		.mem = VM_MEM_ANON,
		.vcpus = 1,
		.memory_mib = 128,
		.accel = ACCEL_TCG,
		.tb_size_mib = 32,
		.cmdline_extra = "loglevel=7",
	};
	base = event_base_new();
	RUN(test_launch_kill_adopt);
	RUN(test_snapshot_and_clone);
	if (geteuid() == 0)
		RUN(test_jailed);
	else
		NOTE("not root: jailed VMs not exercised");
	CHECK(vm_remove_files(&spec, &err) == 0 && access(run, F_OK) < 0 && access(sock, F_OK) < 0,
	      "vm_remove_files: run_dir and sock_dir gone (%s)", err.msg);
	unlink(disk);
	CHECK(rmdir(dir) == 0, "nothing else was left in %s", dir);
	event_base_free(base);
	return DONE();
}
