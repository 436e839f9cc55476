/* test_vm_live.c -- real QEMU: launch, console, QMP, kill, external SIGKILL, adopt, remove files.
 * Needs the guest kernel and the minimal template (or SPACE_TEST_KERNEL / SPACE_TEST_IMAGE);
 * skipped (77) without them. Runs under TCG (a few seconds). */
#include <event2/event.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/vmm/proc.h"
#include "daemon/vmm/vm.h"
#include "harness.h"

static struct event_base *base;
static int exits;
static char reason[128];
static bool got_reply;
static char reply_status[32];

static bool free_in_cb;

static void on_exit_cb(struct vm *vm, const char *why, void *arg)
{
	(void)arg;
	exits++;
	/* sandbox.c's pattern: free first, then use `why` (valid for the call). */
	if (free_in_cb)
		vm_free(vm);
	snprintf(reason, sizeof(reason), "%s", why);
}

static void on_status(json_t *reply, const char *error, void *arg)
{
	(void)arg;
	got_reply = true;
	snprintf(reply_status, sizeof(reply_status), "%s",
		 error ? "error" : json_string_value(json_object_get(reply, "status")));
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
static bool console_has_kernel(void)
{
	char buf[4096] = "";
	FILE *f = fopen(console_path, "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return strstr(buf, "Linux version") != NULL;
}
static bool exited(void)
{
	return exits > 0;
}
static bool replied(void)
{
	return got_reply;
}

static void test_vm_live(void)
{
	const char *kernel = getenv("SPACE_TEST_KERNEL") ?: "build/kernel/vmlinuz";
	const char *image = getenv("SPACE_TEST_IMAGE") ?: "build/templates/minimal/rootfs.ext4";
	char dir[] = "/tmp/test_vm_live.XXXXXX", run[128], sock[128], mem[128];
	space_err err = { 0 };
	struct vm *vm = NULL;

	if (access(kernel, R_OK) < 0 || access(image, R_OK) < 0)
		SKIP_ALL("no guest kernel or minimal template (make kernel template-minimal)");
	if (access("/usr/bin/qemu-system-x86_64", X_OK) < 0 && !getenv("SPACE_QEMU"))
		SKIP_ALL("no qemu-system-x86_64");
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir))
		SKIP_ALL("mkdtemp");
	snprintf(run, sizeof(run), "%s/run", dir);
	snprintf(sock, sizeof(sock), "%s/s", dir);
	snprintf(mem, sizeof(mem), "%s/shm/vm.mem", dir);
	snprintf(console_path, sizeof(console_path), "%s/console.log", run);
	struct vm_spec spec = {
		.id = "sb-unit-live",
		.run_dir = run,
		.sock_dir = sock,
		.mem_path = mem,
		.kernel = kernel,
		.base_image = image,
		.vcpus = 1,
		.memory_mib = 128,
		.accel = ACCEL_TCG,
		.tb_size_mib = 32,
		.cmdline_extra = "loglevel=7",
	};
	base = event_base_new();

	/* 1. launch, console, QMP, vm_kill */
	int64_t t0 = mono_ms();
	CHECK(vm_launch(base, &spec, on_exit_cb, NULL, &vm, &err) == 0, "vm_launch (%s)", err.msg);
	if (!vm)
		return;
	NOTE("launch returned after %lld ms", (long long)(mono_ms() - t0));
	CHECK(vm_pid(vm) > 0 && vm_pid_start(vm) == proc_start_time(vm_pid(vm)), "pid and start time");
	struct stat st;
	CHECK(stat(vm_agent_path(vm), &st) == 0 && S_ISSOCK(st.st_mode), "agent socket exists");
	struct vm *again = NULL;
	CHECK(vm_launch(base, &spec, on_exit_cb, NULL, &again, &err) < 0 && err.code == EEXIST,
	      "second launch of a running sandbox refused");
	CHECK(vm_qmp(vm, "query-status", NULL, on_status, NULL, &err) == 0, "vm_qmp");
	CHECK(run_until(replied, 5000) && strcmp(reply_status, "running") == 0, "query-status: running");
	CHECK(run_until(console_has_kernel, 20000), "kernel output in console.log");
	vm_kill(vm);
	CHECK(run_until(exited, 5000) && exits == 1, "exit callback after vm_kill: %s", reason);
	CHECK(strcmp(reason, "exited with status 0") == 0, "quit over QMP: exit status 0");
	CHECK(vm_qmp(vm, "query-status", NULL, NULL, NULL, &err) < 0 && err.code == ESRCH,
	      "vm_qmp after exit fails");
	vm_free(vm);

	/* 2. killed from outside; the callback frees the vm */
	exits = 0;
	free_in_cb = true;
	CHECK(vm_launch(base, &spec, on_exit_cb, NULL, &vm, &err) == 0, "relaunch (%s)", err.msg);
	if (!vm)
		return;
	kill(vm_pid(vm), SIGKILL);
	CHECK(run_until(exited, 5000) && strcmp(reason, "killed by signal 9") == 0,
	      "external SIGKILL reported: %s", reason);
	free_in_cb = false;

	/* 2b. adopting a QEMU whose QMP is taken (unreachable) kills it */
	exits = 0;
	CHECK(vm_launch(base, &spec, on_exit_cb, NULL, &vm, &err) == 0, "launch (%s)", err.msg);
	if (!vm)
		return;
	struct vm *second = NULL;
	CHECK(vm_adopt(base, &spec, vm_pid(vm), vm_pid_start(vm), on_exit_cb, NULL, &second, &err) < 0 &&
		      strstr(err.msg, "killed unreachable"),
	      "adopt of an unreachable QEMU fails and ends it (%s)", err.msg);
	CHECK(run_until(exited, 5000) && strcmp(reason, "killed by signal 9") == 0,
	      "the first watcher sees it killed: %s", reason);
	vm_free(vm);

	/* 3. adopt after a "restart": vm_free leaves QEMU running */
	exits = 0;
	CHECK(vm_launch(base, &spec, on_exit_cb, NULL, &vm, &err) == 0, "launch for adoption (%s)", err.msg);
	if (!vm)
		return;
	int pid = vm_pid(vm);
	uint64_t start = vm_pid_start(vm);
	vm_free(vm);
	vm = NULL;
	CHECK(kill(pid, 0) == 0, "vm_free leaves QEMU running");
	CHECK(vm_adopt(base, &spec, pid, start + 1, on_exit_cb, NULL, &vm, &err) < 0 && err.code == ESRCH,
	      "adopt with a wrong start time refused");
	struct vm_spec other = spec;
	other.id = "sb-someone-else";
	CHECK(vm_adopt(base, &other, pid, start, on_exit_cb, NULL, &vm, &err) < 0 && err.code == ESRCH,
	      "adopt as another sandbox refused");
	CHECK(vm_adopt(base, &spec, pid, start, on_exit_cb, NULL, &vm, &err) == 0, "adopt (%s)", err.msg);
	if (!vm) {
		kill(pid, SIGKILL);
		return;
	}
	got_reply = false;
	vm_qmp(vm, "query-status", NULL, on_status, NULL, &err);
	CHECK(run_until(replied, 5000) && strcmp(reply_status, "running") == 0, "adopted QMP answers");
	vm_kill(vm);
	CHECK(run_until(exited, 5000), "adopted VM killed: %s", reason);
	vm_free(vm);

	/* 4. files */
	CHECK(vm_remove_files(&spec, &err) == 0, "vm_remove_files (%s)", err.msg);
	CHECK(access(run, F_OK) < 0 && access(sock, F_OK) < 0 && access(mem, F_OK) < 0,
	      "run_dir, sock_dir and mem_path gone");
	char shm[160];
	snprintf(shm, sizeof(shm), "%s/shm", dir);
	rmdir(shm);
	rmdir(dir);
	event_base_free(base);
}

int main(void)
{
	RUN(test_vm_live);
	return DONE();
}
