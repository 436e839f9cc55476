/* test_vm_argv.c -- QEMU command line from a vm_spec, spec checks, /proc parsing helpers */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/vmm/proc.h"
#include "daemon/vmm/qmp.h"
#include "daemon/vmm/vm_argv.h"
#include "harness.h"

static struct vm_spec base_spec(void)
{
	struct vm_spec s = {
		.id = "sb-0123456789abcdef",
		.run_dir = "/var/lib/space/sandboxes/sb-0123456789abcdef",
		.sock_dir = "/run/space/ab12/sb-0123456789abcdef",
		.kernel = "/srv/t/vmlinuz",
		.disk = "/var/lib/space/disks/dk-0123456789abcdef.qcow2",
		.mem = VM_MEM_ANON,
		.vcpus = 2,
		.memory_mib = 128,
		.accel = ACCEL_TCG,
		.tb_size_mib = 32,
	};
	return s;
}

/* The argument after `flag` (first occurrence), or NULL. */
static const char *after(const struct strv *a, const char *flag)
{
	int i = strv_find(a, flag);
	return i >= 0 && (size_t)i + 1 < a->n ? a->v[i + 1] : NULL;
}

/* Does some argument after `flag` (any occurrence) equal `value`? */
static bool has_pair(const struct strv *a, const char *flag, const char *value)
{
	for (size_t i = 0; i + 1 < a->n; i++)
		if (strcmp(a->v[i], flag) == 0 && strcmp(a->v[i + 1], value) == 0)
			return true;
	return false;
}

static bool contains(const char *s, const char *sub)
{
	return s && strstr(s, sub);
}

static void test_tcg(void)
{
	struct vm_spec s = base_spec();
	struct strv a = { 0 };
	space_err err = { 0 };

	CHECK(vm_argv_build(&s, "qemu-system-x86_64", &a, &err) == 0, "tcg argv builds (%s)", err.msg);
	CHECK(strcmp(a.v[0], "qemu-system-x86_64") == 0, "argv[0] is the binary");
	CHECK(a.v[a.n] == NULL, "argv is NULL-terminated");
	CHECK(has_pair(&a, "-name", "guest=sb-0123456789abcdef,process=space-sb-0123456789abcdef"),
	      "-name carries guest=<id>");
	const char *m = after(&a, "-M");
	CHECK(contains(m, "microvm,") && contains(m, "memory-backend=mem") && contains(m, "pit=on") &&
		      contains(m, "rtc=on") && contains(m, "acpi=off"),
	      "-M microvm with pit, rtc, acpi=off, memory-backend");
	CHECK(!contains(m, "accel="), "-M has no accel= (conflicts with -accel)");
	CHECK(has_pair(&a, "-accel", "tcg,tb-size=32"), "-accel tcg,tb-size=32");
	CHECK(has_pair(&a, "-cpu", "max"), "-cpu max under TCG");
	CHECK(has_pair(&a, "-object", "memory-backend-ram,id=mem,size=128M"),
	      "a cold boot's memory is anonymous RAM named mem");
	CHECK(strv_find(&a, "-incoming") < 0, "a cold boot waits for no state");
	CHECK(has_pair(&a, "-m", "128M") && has_pair(&a, "-smp", "2"), "-m 128M -smp 2");
	CHECK(strv_find(&a, "-nodefaults") > 0 && strv_find(&a, "-no-user-config") > 0 &&
		      strv_find(&a, "-no-reboot") > 0 && has_pair(&a, "-display", "none"),
	      "-nodefaults -no-user-config -no-reboot -display none");
	CHECK(strv_find(&a, "-nographic") < 0, "no -nographic (it would add a stdio chardev)");
	CHECK(has_pair(&a, "-kernel", "/srv/t/vmlinuz"), "-kernel");
	const char *app = after(&a, "-append");
	CHECK(contains(app, "console=ttyS0 root=/dev/vda rw init=/sbin/space-agent reboot=t panic=-1"),
	      "kernel cmdline: console, root, init, reboot=t, panic=-1");
	CHECK(contains(app, "space.hostname=sb-0123456789abcdef") && contains(app, "random.trust_cpu=on") &&
		      contains(app, "tsc=reliable"),
	      "kernel cmdline: hostname, trust_cpu and tsc=reliable");
	CHECK(has_pair(&a, "-drive",
		       "id=root,file=/var/lib/space/disks/dk-0123456789abcdef.qcow2,format=qcow2,if=none,cache=unsafe,"
		       "discard=unmap,werror=report,rerror=report"),
	      "root drive is the sandbox's top disk layer; I/O errors reach the guest, never pause the VM");
	CHECK(has_pair(&a, "-device", "virtio-blk-device,drive=root"), "virtio-blk-device");
	CHECK(has_pair(&a, "-chardev", "socket,id=agent,fd=3,server=on,wait=off"),
	      "agent chardev: the listening socket passed as fd 3");
	CHECK(has_pair(&a, "-device", "virtserialport,chardev=agent,name=space.agent") &&
		      has_pair(&a, "-device", "virtio-serial-device,max_ports=2"),
	      "virtio-serial port space.agent");
	CHECK(has_pair(&a, "-chardev", "socket,id=qmp,fd=4,server=on,wait=off") &&
		      has_pair(&a, "-mon", "chardev=qmp,mode=control"),
	      "QMP on the socket passed as fd 4");
	CHECK(has_pair(&a, "-chardev", "socket,id=con,fd=5,server=on,wait=off") &&
		      has_pair(&a, "-serial", "chardev:con"),
	      "serial console on the socket passed as fd 5");
	CHECK(has_pair(&a, "-device", "virtio-rng-device"), "virtio-rng");
	CHECK(strv_find(&a, "-sandbox") < 0, "no -sandbox without the jail");
	CHECK(strv_find(&a, "-netdev") < 0 && strv_find(&a, "-nic") < 0, "no network device without net_ns");
	CHECK(VM_FD_AGENT == 3 && VM_FD_QMP == 4 && VM_FD_CONSOLE == 5, "fd numbers as vm_launch passes them");
	strv_free(&a);
}

/* A sandbox's VM: the TAP proc.c opened as fd 7, one virtio-net device with the
 * guest's fixed MAC, after every other device (their virtio-mmio slots stay). */
static void test_net_device(void)
{
	struct vm_spec s = base_spec();
	struct strv a = { 0 };
	space_err err = { 0 };

	s.netns = true;
	s.net_ns = "/run/netns/space-ab12-sb-0123456789abcdef";
	CHECK(vm_argv_build(&s, "qemu", &a, &err) == 0, "argv with a network device: %s", err.msg);
	CHECK(has_pair(&a, "-netdev", "tap,id=n0,fd=7"), "the TAP as fd 7");
	CHECK(has_pair(&a, "-device", "virtio-net-device,netdev=n0,mac=52:54:00:a9:00:15"),
	      "virtio-net with the guest's MAC");
	CHECK(strv_find(&a, "-netdev") > strv_find(&a, "virtio-rng-device"), "net after the other devices");
	CHECK(VM_FD_TAP > VM_FD_MEM, "the TAP's fd is above the passed ones");
	strv_free(&a);
	s.netns = false;
	CHECK(vm_spec_check(&s, &err) < 0 && err.code == EINVAL, "a network device needs its own netns");
	s.netns = true;
	s.net_ns = "netns/x";
	CHECK(vm_spec_check(&s, &err) < 0, "a relative netns path is refused");
}

static void test_from_snapshot(void)
{
	struct vm_spec s = base_spec();
	struct strv a = { 0 };
	space_err err = { 0 };

	s.mem = VM_MEM_IMAGE;
	s.mem_image = "/dev/shm/space-ab12/snapshots/sn-1/mem";
	s.incoming = "/dev/shm/space-ab12/snapshots/sn-1/state";
	CHECK(vm_argv_build(&s, "q", &a, &err) == 0, "a clone's argv builds (%s)", err.msg);
	CHECK(has_pair(&a, "-object",
		       "memory-backend-file,id=mem,size=128M,mem-path=/dev/shm/space-ab12/snapshots/sn-1/mem,share=off"),
	      "a clone maps the snapshot's memory image privately (copy-on-write)");
	CHECK(has_pair(&a, "-incoming", "defer"), "a clone waits for its state over QMP");
	strv_free(&a);
	s.jail = true;
	s.run_uid = 2000000001;
	s.run_gid = 2000000001;
	s.jail_dir = "/run/space/ab12/jail/sb-0123456789abcdef";
	CHECK(vm_argv_build(&s, "q", &a, &err) == 0, "a jailed clone's argv builds (%s)", err.msg);
	CHECK(has_pair(&a, "-object", "memory-backend-file,id=mem,size=128M,mem-path=/proc/self/fd/6,share=off"),
	      "a jailed clone maps the sealed memfd passed as fd 6");
	strv_free(&a);
	s.mem_own = true;
	CHECK(vm_argv_build(&s, "q", &a, &err) == 0, "a jailed restore's argv builds (%s)", err.msg);
	CHECK(has_pair(&a, "-object",
		       "memory-backend-file,id=mem,size=128M,mem-path=/dev/shm/space-ab12/snapshots/sn-1/mem,share=off"),
	      "an image the VM owns alone (its suspend snapshot) is mapped from its path");
	strv_free(&a);
	s.mem_own = false;
	s.run_uid = 0;
	CHECK(vm_spec_check(&s, &err) < 0 && err.code == EINVAL, "a jail without a uid is refused");
	s.run_uid = 2000000001;
	s.jail_dir = "relative";
	CHECK(vm_spec_check(&s, &err) < 0 && err.code == EINVAL, "a jail root must be absolute");
	s.jail = false;
	s.mem = VM_MEM_ANON;
	CHECK(vm_spec_check(&s, &err) < 0 && err.code == EINVAL, "a state without its image is refused");
	s.mem = VM_MEM_IMAGE;
	s.mem_image = NULL;
	CHECK(vm_spec_check(&s, &err) < 0 && err.code == EINVAL, "an image kind without a path is refused");
}

static void test_kvm_and_options(void)
{
	struct vm_spec s = base_spec();
	struct strv a = { 0 };
	space_err err = { 0 };

	s.accel = ACCEL_KVM;
	s.tb_size_mib = 0; /* irrelevant under KVM */
	s.jail = true;
	s.run_uid = 2000000001;
	s.run_gid = 2000000001;
	s.jail_dir = "/run/space/ab12/jail/sb-0123456789abcdef";
	s.cmdline_extra = "loglevel=7 space.x=1";
	CHECK(vm_argv_build(&s, "/usr/bin/qemu", &a, &err) == 0, "kvm argv builds (%s)", err.msg);
	CHECK(has_pair(&a, "-accel", "kvm") && has_pair(&a, "-cpu", "host"), "-accel kvm -cpu host");
	CHECK(!contains(after(&a, "-accel"), "tb-size"), "no tb-size under KVM");
	CHECK(contains(after(&a, "-sandbox"), "on,") && contains(after(&a, "-sandbox"), "elevateprivileges=deny") &&
		      contains(after(&a, "-sandbox"), "spawn=deny"),
	      "jail: QEMU -sandbox on, no spawning (snapshots pass descriptors instead)");
	const char *app = after(&a, "-append");
	size_t n = strlen(app), m = strlen(" loglevel=7 space.x=1");
	CHECK(n > m && strcmp(app + n - m, " loglevel=7 space.x=1") == 0, "cmdline_extra appended last");
	strv_free(&a);
}

static void test_escaping(void)
{
	struct vm_spec s = base_spec();
	struct strv a = { 0 };
	space_err err = { 0 };
	char *e = qemu_opt_escape("a,b,,c");

	CHECK(e && strcmp(e, "a,,b,,,,c") == 0, "qemu_opt_escape doubles commas");
	free(e);
	s.mem = VM_MEM_IMAGE;
	s.mem_image = "/dev/shm/x,share=on/mem";
	s.disk = "/r,un/top.qcow2";
	CHECK(vm_argv_build(&s, "q", &a, &err) == 0, "paths with commas build");
	CHECK(contains(after(&a, "-object"), "mem-path=/dev/shm/x,,share=on/mem,share=off"),
	      "a comma in the image path cannot inject options");
	CHECK(contains(after(&a, "-drive"), "file=/r,,un/top.qcow2,"), "a comma in the disk path is escaped");
	strv_free(&a);
}

static void test_spec_check(void)
{
	struct vm_spec s;
	space_err err = { 0 };
	char longdir[200];

	s = base_spec();
	CHECK(vm_spec_check(&s, &err) == 0, "valid spec passes");
	s.id = "sb-1,x=y";
	CHECK(vm_spec_check(&s, &err) < 0 && err.code == EINVAL, "id with a comma rejected");
	s.id = "sb 1";
	CHECK(vm_spec_check(&s, &err) < 0, "id with a space rejected");
	s.id = "";
	CHECK(vm_spec_check(&s, &err) < 0, "empty id rejected");
	s = base_spec();
	s.vcpus = 0;
	CHECK(vm_spec_check(&s, &err) < 0 && err.code == EINVAL, "0 vcpus rejected");
	s = base_spec();
	s.memory_mib = 8;
	CHECK(vm_spec_check(&s, &err) < 0, "8 MiB rejected");
	s = base_spec();
	s.tb_size_mib = 0;
	CHECK(vm_spec_check(&s, &err) < 0, "tb_size 0 rejected under TCG");
	s.accel = ACCEL_KVM;
	CHECK(vm_spec_check(&s, &err) == 0, "tb_size 0 fine under KVM");
	s = base_spec();
	memset(longdir, 'd', sizeof(longdir) - 1);
	longdir[0] = '/';
	longdir[100] = '\0';
	s.sock_dir = longdir;
	CHECK(vm_spec_check(&s, &err) < 0 && strstr(err.msg, "unix sockets"),
	      "sock_dir too long for sun_path rejected (%s)", err.msg);
	s = base_spec();
	s.cmdline_extra = "a\nb";
	CHECK(vm_spec_check(&s, &err) < 0, "newline in cmdline_extra rejected");
	s = base_spec();
	char big[2100];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	s.cmdline_extra = big;
	struct strv a = { 0 };
	CHECK(vm_argv_build(&s, "q", &a, &err) < 0 && strstr(err.msg, "too long"),
	      "oversized kernel command line rejected");
	strv_free(&a);
	s = base_spec();
	s.kernel = NULL;
	CHECK(vm_spec_check(&s, &err) < 0, "missing kernel rejected");
}

static void test_probe_argv(void)
{
	struct strv a = { 0 };
	space_err err = { 0 };

	CHECK(vm_probe_argv_build("q", "/k", "/i,mg", false, &a, &err) == 0, "probe argv builds");
	CHECK(has_pair(&a, "-accel", "kvm") && has_pair(&a, "-cpu", "host"), "probe uses KVM as launch would");
	CHECK(contains(after(&a, "-append"), "space.probe=1"), "probe cmdline has space.probe=1");
	CHECK(contains(after(&a, "-drive"), "file=/i,,mg,format=raw") &&
		      contains(after(&a, "-drive"), "snapshot=on"),
	      "probe disk is the raw template, snapshot=on");
	CHECK(has_pair(&a, "-serial", "chardev:con") && contains(after(&a, "-chardev"), "stdio"),
	      "probe console on stdout");
	CHECK(strv_find(&a, "-sandbox") < 0, "no -sandbox for an unjailed probe");
	strv_free(&a);
	CHECK(vm_probe_argv_build("q", "/k", "/i", true, &a, &err) == 0 &&
		      contains(after(&a, "-sandbox"), "spawn=deny"),
	      "a jailed probe has QEMU's -sandbox too");
	strv_free(&a);
}

static void test_proc(void)
{
	uint64_t v = 0;
	const char *plain = "1234 (qemu) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 3 0 987654 "
			    "1000 200 18446744073709551615";
	const char *nasty = "77 (a) b (c) 0 0 0 0) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 42 x";

	CHECK(proc_stat_parse_starttime(plain, &v) == 0 && v == 987654, "starttime of a plain stat line");
	CHECK(proc_stat_parse_starttime(nasty, &v) == 0 && v == 42,
	      "comm with spaces and ')' parsed after the last ')'");
	CHECK(proc_stat_parse_starttime("12 (x) R 1 2", &v) < 0, "short line rejected");
	CHECK(proc_stat_parse_starttime("garbage", &v) < 0, "no ')' rejected");
	CHECK(proc_start_time(getpid()) > 0, "proc_start_time(self) > 0");
	CHECK(proc_start_time(0) == 0 && proc_start_time(-5) == 0, "invalid pid -> 0");

	pid_t child = fork();
	if (child == 0)
		_exit(0);
	waitpid(child, NULL, 0);
	CHECK(proc_start_time(child) == 0, "reaped pid -> 0");

	static const char cmd[] = "qemu\0-name\0guest=sb-1,process=x\0-M\0microvm";
	CHECK(cmdline_buf_has(cmd, sizeof(cmd), "-name", "guest=sb-1"), "cmdline: -name guest=sb-1 found");
	CHECK(!cmdline_buf_has(cmd, sizeof(cmd), "-name", "guest=sb-"), "cmdline: id prefix is not a match");
	CHECK(!cmdline_buf_has(cmd, sizeof(cmd), "-M", "guest=sb-1"), "cmdline: flag must precede value");
	static const char cmd2[] = "qemu\0-name\0guest=sb-1";
	CHECK(cmdline_buf_has(cmd2, sizeof(cmd2) - 1, "-name", "guest=sb-1"), "cmdline: last arg without NUL");
	static const char cmd3[] = "sh\0-c\0-name guest=sb-1";
	CHECK(!cmdline_buf_has(cmd3, sizeof(cmd3), "-name", "guest=sb-1"), "cmdline: a shell string is no match");

	char buf[64];
	proc_status_text(0x0100, buf, sizeof(buf));
	CHECK(strcmp(buf, "exited with status 1") == 0, "status text: exit 1");
	proc_status_text(9, buf, sizeof(buf));
	CHECK(strcmp(buf, "killed by signal 9") == 0, "status text: signal 9");

	space_err err = { 0 };
	char *ok[] = { "true", NULL }, *bad[] = { "false", NULL }, *none[] = { "/nonexistent/bin", NULL };
	CHECK(proc_run(ok, -1, 5000, &err) == 0, "proc_run true");
	CHECK(proc_run(bad, -1, 5000, &err) < 0 && strstr(err.msg, "exited with status 1"),
	      "proc_run false: %s", err.msg);
	CHECK(proc_run(none, -1, 5000, &err) < 0 && err.code == ENOENT && strstr(err.msg, "exec"),
	      "proc_run of a missing binary reports the exec step: %s", err.msg);
	char *slow[] = { "sleep", "10", NULL };
	CHECK(proc_run(slow, -1, 200, &err) < 0 && err.code == ETIMEDOUT, "proc_run times out and kills");
}

static void test_qmp_classify(void)
{
	json_t *m;

	m = json_loads("{\"QMP\":{\"version\":{}}}", 0, NULL);
	CHECK(qmp_classify(m) == QMP_MSG_GREETING, "greeting");
	json_decref(m);
	m = json_loads("{\"return\":{},\"id\":3}", 0, NULL);
	CHECK(qmp_classify(m) == QMP_MSG_RETURN, "return");
	json_decref(m);
	m = json_loads("{\"error\":{\"class\":\"GenericError\",\"desc\":\"x\"}}", 0, NULL);
	CHECK(qmp_classify(m) == QMP_MSG_ERROR, "error");
	json_decref(m);
	m = json_loads("{\"event\":\"STOP\",\"timestamp\":{}}", 0, NULL);
	CHECK(qmp_classify(m) == QMP_MSG_EVENT, "event");
	json_decref(m);
	CHECK(qmp_classify(NULL) == QMP_MSG_BAD_JSON, "unparsable");
	m = json_loads("{\"what\":1}", 0, NULL);
	CHECK(qmp_classify(m) == QMP_MSG_UNKNOWN, "unknown");
	json_decref(m);
}

int main(void)
{
	RUN(test_tcg);
	RUN(test_net_device);
	RUN(test_from_snapshot);
	RUN(test_kvm_and_options);
	RUN(test_escaping);
	RUN(test_spec_check);
	RUN(test_probe_argv);
	RUN(test_proc);
	RUN(test_qmp_classify);
	return DONE();
}
