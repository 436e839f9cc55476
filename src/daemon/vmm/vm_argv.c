/* vm_argv.c -- builds the qemu-system-x86_64 -M microvm command line from a vm_spec */
#include "proc.h"
#include "vm_argv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"
#include "egress/rules.h"

/* x86 COMMAND_LINE_SIZE is 2048; microvm appends one virtio_mmio.device=
 * entry (~45 bytes) per device, so leave room for those: blk, serial, rng
 * and net are four (~180 bytes), well inside the 512 kept back. */
#define VM_CMDLINE_MAX 1536

const char *vm_qemu_binary(void)
{
	const char *e = getenv("SPACE_QEMU");
	return e && *e ? e : "qemu-system-x86_64";
}

const char *vm_qemu_img_binary(void)
{
	const char *e = getenv("SPACE_QEMU_IMG");
	return e && *e ? e : "qemu-img";
}

const char *vm_memcvt_binary(void)
{
	static char path[PATH_MAX];

	return proc_sibling_binary("SPACE_MEMCVT", "space-memcvt", path);
}

int vm_file_path(const struct vm_spec *spec, enum vm_file f, char out[PATH_MAX])
{
	const char *dir = spec->sock_dir, *name = "";
	size_t max = PATH_MAX;

	switch (f) {
	case VM_AGENT_SOCK:
		name = "agent.sock";
		max = sizeof(((struct sockaddr_un *)0)->sun_path);
		break;
	case VM_QMP_SOCK:
		name = "qmp.sock";
		max = sizeof(((struct sockaddr_un *)0)->sun_path);
		break;
	case VM_CONSOLE_SOCK:
		name = "console.sock";
		max = sizeof(((struct sockaddr_un *)0)->sun_path);
		break;
	case VM_CONSOLE_LOG:
		dir = spec->run_dir;
		name = "console.log";
		break;
	case VM_QEMU_LOG:
		dir = spec->run_dir;
		name = "qemu.log";
		break;
	}
	int n = snprintf(out, PATH_MAX, "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= max) {
		out[0] = '\0';
		return -1;
	}
	return 0;
}

char *qemu_opt_escape(const char *s)
{
	size_t n = strlen(s), commas = 0;

	for (size_t i = 0; i < n; i++)
		commas += s[i] == ',';
	char *out = malloc(n + commas + 1), *p = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		*p++ = s[i];
		if (s[i] == ',')
			*p++ = ',';
	}
	*p = '\0';
	return out;
}

static bool id_ok(const char *id)
{
	if (!id || !*id || strlen(id) > 64)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '-' || *p == '_' || *p == '.'))
			return false;
	return true;
}

int vm_spec_check(const struct vm_spec *spec, space_err *err)
{
	char p[PATH_MAX];

	/* The id lands in -name, the kernel command line and the adoption
	 * check: keep it to characters none of those need to quote. */
	if (!id_ok(spec->id))
		return err_set(err, EINVAL, "invalid sandbox id '%s'", spec->id ? spec->id : "");
	if (!spec->run_dir || !spec->sock_dir || !spec->kernel || !spec->disk)
		return err_set(err, EINVAL, "vm spec for %s is missing a path", spec->id);
	if (spec->mem == VM_MEM_IMAGE && !spec->mem_image)
		return err_set(err, EINVAL, "vm spec for %s: a memory image is needed", spec->id);
	if (spec->mem != VM_MEM_IMAGE && spec->incoming)
		/* The state holds no RAM (x-ignore-shared): it resumes only on
		 * the image the RAM was written to. */
		return err_set(err, EINVAL, "vm spec for %s: an incoming state needs its memory image",
			       spec->id);
	if (spec->jail && (spec->run_uid == 0 || spec->run_gid == 0 || !spec->jail_dir ||
			   spec->jail_dir[0] != '/'))
		return err_set(err, EINVAL, "vm spec for %s: a jail needs a non-zero uid and gid and a root",
			       spec->id);
	/* QEMU resolves paths inside its jail, from its root. */
	if (spec->jail && (spec->kernel[0] != '/' || spec->disk[0] != '/' ||
			   (spec->mem_image && spec->mem_image[0] != '/')))
		return err_set(err, EINVAL, "vm spec for %s: a jailed VM's kernel, disk and image need absolute paths",
			       spec->id);
	if (spec->vcpus < 1 || spec->vcpus > 64)
		return err_set(err, EINVAL, "vcpus must be 1..64, not %d", spec->vcpus);
	if (spec->memory_mib < 32 || spec->memory_mib > 1024 * 1024)
		return err_set(err, EINVAL, "memory_mib must be at least 32, not %d", spec->memory_mib);
	if (spec->accel == ACCEL_TCG && (spec->tb_size_mib < 1 || spec->tb_size_mib > 4096))
		return err_set(err, EINVAL, "tb_size_mib must be 1..4096, not %d", spec->tb_size_mib);
	for (enum vm_file f = VM_AGENT_SOCK; f <= VM_QEMU_LOG; f++)
		if (vm_file_path(spec, f, p) < 0)
			return err_set(err, EINVAL, "path too long under %s (unix sockets allow %zu bytes)",
				       f <= VM_CONSOLE_SOCK ? spec->sock_dir : spec->run_dir,
				       sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
	if (spec->net_ns && (!spec->netns || spec->net_ns[0] != '/'))
		return err_set(err, EINVAL, "vm spec for %s: a network device needs its own netns and an absolute netns path",
			       spec->id);
	if (spec->cmdline_extra && strpbrk(spec->cmdline_extra, "\n\r"))
		return err_set(err, EINVAL, "kernel command line must be one line");
	return 0;
}

int vm_kernel_cmdline(const struct vm_spec *spec, char *out, size_t len, space_err *err)
{
	/* root=/dev/vda is the only virtio-blk device; the agent is init.
	 * reboot=t: with acpi=off a guest reboot only ends QEMU (-no-reboot)
	 * through the triple-fault path. panic=-1: a panicking guest reboots,
	 * i.e. QEMU exits, instead of hanging. tsc=reliable: microvm has no HPET
	 * or ACPI PM timer to refine the TSC against, so the guest kept tsc-early,
	 * which is not valid for high-resolution timers: every sleep and timeout
	 * in the guest was rounded to the 4 ms tick (nanosleep(100 us) took ~4 ms
	 * under TCG; ~0.25 ms with this). Under KVM kvm-clock is used anyway. */
	int n = snprintf(out, len,
			 "console=ttyS0 root=/dev/vda rw init=/sbin/space-agent reboot=t panic=-1 quiet "
			 "random.trust_cpu=on tsc=reliable space.hostname=%s%s%s",
			 spec->id, spec->cmdline_extra && *spec->cmdline_extra ? " " : "",
			 spec->cmdline_extra ? spec->cmdline_extra : "");
	if (n < 0 || (size_t)n >= len || n > VM_CMDLINE_MAX)
		return err_set(err, EINVAL, "kernel command line too long (%d bytes, at most %d)", n,
			       VM_CMDLINE_MAX);
	return 0;
}
/* A unix socket QEMU listens on without waiting for a client: the daemon
 * bound it and passes it as descriptor `fd`, then connects (and reconnects
 * after a restart, by path). */
static void add_listen_chardev(struct strv *a, const char *id, int fd)
{
	strv_add(a, "-chardev");
	strv_addf(a, "socket,id=%s,fd=%d,server=on,wait=off", id, fd);
}

static void add_memory(const struct vm_spec *spec, const char *image, struct strv *a)
{
	strv_add(a, "-object");
	if (spec->mem == VM_MEM_IMAGE && spec->jail && !spec->mem_own)
		/* The image as a sealed memfd QEMU inherits (memimg.c): it can
		 * open it O_RDWR as QEMU 7.2 insists, but never write it. */
		strv_addf(a, "memory-backend-file,id=mem,size=%dM,mem-path=/proc/self/fd/%d,share=off",
			  spec->memory_mib, VM_FD_MEM);
	else if (spec->mem == VM_MEM_IMAGE)
		/* share=off: a private copy-on-write mapping. The image is
		 * never written; pages the guest does not touch stay shared with
		 * every VM started from the same snapshot. */
		strv_addf(a, "memory-backend-file,id=mem,size=%dM,mem-path=%s,share=off", spec->memory_mib,
			  image);
	else
		strv_addf(a, "memory-backend-ram,id=mem,size=%dM", spec->memory_mib);
}

int vm_argv_build(const struct vm_spec *spec, const char *qemu, struct strv *a, space_err *err)
{
	char cmdline[2048];

	if (vm_spec_check(spec, err) < 0 || vm_kernel_cmdline(spec, cmdline, sizeof(cmdline), err) < 0)
		return -1;
	_cleanup_free_ char *image = qemu_opt_escape(spec->mem_image ? spec->mem_image : "");
	_cleanup_free_ char *disk = qemu_opt_escape(spec->disk);
	if (!image || !disk)
		return err_set(err, ENOMEM, "building qemu argv: out of memory");

	strv_add(a, qemu);
	/* -name: the adoption check finds "guest=<id>" after "-name" in
	 * /proc/PID/cmdline; process= sets comm (15 chars) for ps/top. */
	strv_add(a, "-name");
	strv_addf(a, VM_NAME_KEY "%s,process=space-%s", spec->id, spec->id);
	/* See VM_MACHINE; RAM comes from the "mem" backend below (the name
	 * is the RAM block's id in snapshots: space-memcvt looks for it). */
	strv_add(a, "-M");
	strv_add(a, VM_MACHINE ",memory-backend=mem");
	strv_add(a, "-accel");
	if (spec->accel == ACCEL_KVM) {
		strv_add(a, "kvm");
		strv_add(a, "-cpu");
		strv_add(a, "host");
	} else {
		/* The default translation cache is far larger than a sandbox needs. */
		strv_addf(a, "tcg,tb-size=%d", spec->tb_size_mib);
		strv_add(a, "-cpu");
		strv_add(a, "max");
	}
	add_memory(spec, image, a);
	strv_add(a, "-m");
	strv_addf(a, "%dM", spec->memory_mib);
	strv_add(a, "-smp");
	strv_addf(a, "%d", spec->vcpus);
	strv_add(a, "-nodefaults");
	strv_add(a, "-no-user-config");
	strv_add(a, "-display");
	strv_add(a, "none");
	strv_add(a, "-no-reboot");
	strv_add(a, "-kernel");
	strv_add(a, spec->kernel);
	strv_add(a, "-append");
	strv_add(a, cmdline);
	/* Root disk: the sandbox's top qcow2 layer (its backing chain ends at
	 * the template's read-only raw image). cache=unsafe (Firecracker's
	 * default too): guest flushes are not forced to the host disk; a
	 * sandbox does not survive a host crash. werror/rerror=report: a full
	 * host disk is an I/O error in the guest, never a paused VM (QEMU's
	 * default stops the VM on ENOSPC and waits for someone to resume it). */
	strv_add(a, "-drive");
	strv_addf(a, "id=root,file=%s,format=qcow2,if=none,cache=unsafe,discard=unmap,werror=report,rerror=report",
		  disk);
	strv_add(a, "-device");
	strv_add(a, "virtio-blk-device,drive=root");
	/* Agent channel: virtio-serial port "space.agent". */
	add_listen_chardev(a, "agent", VM_FD_AGENT);
	strv_add(a, "-device");
	strv_add(a, "virtio-serial-device,max_ports=2");
	strv_add(a, "-device");
	strv_add(a, "virtserialport,chardev=agent,name=space.agent");
	add_listen_chardev(a, "qmp", VM_FD_QMP);
	strv_add(a, "-mon");
	strv_add(a, "chardev=qmp,mode=control");
	/* Serial console to a socket the daemon reads into a bounded log;
	 * while nobody is connected QEMU drops the output. */
	add_listen_chardev(a, "con", VM_FD_CONSOLE);
	strv_add(a, "-serial");
	strv_add(a, "chardev:con");
	strv_add(a, "-device");
	strv_add(a, "virtio-rng-device");
	if (spec->net_ns) {
		/* The TAP proc.c opened in the sandbox's netns. Added last among
		 * the devices so the others keep their virtio-mmio slots; a
		 * snapshot restores only onto the same device list. No vnet_hdr=:
		 * QEMU 7.2 refuses it beside fd= and asks the descriptor instead,
		 * which was opened without IFF_VNET_HDR (so: none). */
		strv_add(a, "-netdev");
		strv_addf(a, "tap,id=n0,fd=%d", VM_FD_TAP);
		strv_add(a, "-device");
		strv_add(a, "virtio-net-device,netdev=n0,mac=" EGRESS_GUEST_MAC);
	}
	if (spec->incoming) {
		/* Waits, vCPUs stopped, for migrate-incoming over QMP: the
		 * capabilities the state was written with must be set first. */
		strv_add(a, "-incoming");
		strv_add(a, "defer");
	}
	if (spec->jail) {
		/* QEMU's own seccomp filter, behind ours (seccomp.c). Snapshots
		 * pass descriptors over QMP, so QEMU never needs to spawn anything. */
		strv_add(a, "-sandbox");
		strv_add(a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
	}
	if (a->failed)
		return err_set(err, ENOMEM, "building qemu argv: out of memory");
	return 0;
}

int vm_probe_argv_build(const char *qemu, const char *kernel, const char *image, bool sandbox, struct strv *a,
			space_err *err)
{
	_cleanup_free_ char *img = qemu_opt_escape(image);

	if (!img)
		return err_set(err, ENOMEM, "building probe argv: out of memory");
	strv_add(a, qemu);
	strv_add(a, "-name");
	strv_add(a, "space-kvm-probe,process=space-probe");
	strv_add(a, "-M");
	strv_add(a, VM_MACHINE);
	strv_add(a, "-accel");
	strv_add(a, "kvm");
	strv_add(a, "-cpu");
	strv_add(a, "host");
	strv_add(a, "-m");
	strv_add(a, "128M");
	strv_add(a, "-smp");
	strv_add(a, "1");
	strv_add(a, "-nodefaults");
	strv_add(a, "-no-user-config");
	strv_add(a, "-display");
	strv_add(a, "none");
	strv_add(a, "-no-reboot");
	strv_add(a, "-kernel");
	strv_add(a, kernel);
	strv_add(a, "-append");
	strv_add(a, "console=ttyS0 root=/dev/vda rw init=/sbin/space-agent reboot=t panic=-1 "
		    "random.trust_cpu=on space.hostname=probe space.probe=1");
	/* snapshot=on: the guest may write, the template never changes (the
	 * temporary overlay goes to $TMPDIR). */
	strv_add(a, "-drive");
	strv_addf(a, "id=root,file=%s,format=raw,if=none,snapshot=on", img);
	strv_add(a, "-device");
	strv_add(a, "virtio-blk-device,drive=root");
	/* The console goes to QEMU's stdout, a pipe the prober reads. */
	strv_add(a, "-chardev");
	strv_add(a, "stdio,id=con,signal=off");
	strv_add(a, "-serial");
	strv_add(a, "chardev:con");
	strv_add(a, "-device");
	strv_add(a, "virtio-rng-device");
	if (sandbox) {
		strv_add(a, "-sandbox");
		strv_add(a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
	}
	if (a->failed)
		return err_set(err, ENOMEM, "building probe argv: out of memory");
	return 0;
}
