/* seccomp.c -- a libseccomp denylist for jailed children: what QEMU never needs fails with EPERM.
 *
 * This is a second fence behind QEMU's own -sandbox filter (which QEMU
 * installs after its start-up, and which an argv mistake could leave out):
 * ours is in force from the first instruction of the new program. It is a
 * denylist, not an allowlist, because QEMU's needs vary with accelerator,
 * devices and library versions; what it lists are the ways out of a jail
 * (namespaces, mounts, ptrace, kernel modules, keyrings, bpf, io_uring,
 * privilege changes) that no VMM flow uses. */
#include "seccomp.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdbool.h>
#include <seccomp.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

const char *const jail_denied_syscalls[] = {
	/* mounts and namespaces */
	"mount", "umount", "umount2", "pivot_root", "chroot", "unshare", "setns", "open_tree", "move_mount",
	"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	/* other processes and the kernel */
	"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf",
	"perf_event_open", "lookup_dcookie", "userfaultfd", "uselib", "personality",
	/* keyrings */
	"keyctl", "add_key", "request_key",
	/* file handles bypass path permissions */
	"open_by_handle_at", "name_to_handle_at",
	/* host administration */
	"swapon", "swapoff", "reboot", "acct", "quotactl", "quotactl_fd", "iopl", "ioperm",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "syslog", "fanotify_init",
	"vhangup", "sethostname", "setdomainname", "nfsservctl", "sysfs", "_sysctl", "ustat",
	/* privileges: the jail's uid and capabilities are final */
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "setfsuid",
	"setfsgid", "capset",
	/* io_uring operations are not seen by seccomp */
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	NULL,
};

size_t jail_seccomp_known(void)
{
	size_t n = 0;

	for (const char *const *p = jail_denied_syscalls; *p; p++)
		n += seccomp_syscall_resolve_name(*p) != __NR_SCMP_ERROR;
	return n;
}

static int add_rules(scmp_filter_ctx ctx)
{
	int rc;

	for (const char *const *p = jail_denied_syscalls; *p; p++) {
		int nr = seccomp_syscall_resolve_name(*p);

		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0)) < 0)
			return rc;
	}
	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (rc < 0)
		return rc;
	/* x86-64 clone(flags, ...): flags is the first argument. One rule per
	 * flag: rules are alternatives, and a masked compare can only test
	 * equality. */
	static const unsigned long ns_flags[] = { CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
						  CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME };
	for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++) {
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The filter as the kernel takes it, compiled once by libseccomp (which allocates, so never
 * in a forked child) and exported as BPF. Read only after. */
static struct sock_fprog prog;
static bool prepared;

static int export_bpf(scmp_filter_ctx ctx)
{
	int fd = memfd_create("space-seccomp", MFD_CLOEXEC), rc;
	struct stat st;
	void *buf = NULL;

	if (fd < 0)
		return -errno;
	rc = seccomp_export_bpf(ctx, fd);
	if (rc == 0 && fstat(fd, &st) < 0)
		rc = -errno;
	if (rc == 0 && (st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter) != 0 ||
			st.st_size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS))
		rc = -EINVAL;
	if (rc == 0 && !(buf = malloc((size_t)st.st_size)))
		rc = -ENOMEM;
	if (rc == 0 && pread(fd, buf, (size_t)st.st_size, 0) != st.st_size)
		rc = -EIO;
	close(fd);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	prog.len = (unsigned short)(st.st_size / (off_t)sizeof(struct sock_filter));
	prog.filter = buf;
	return 0;
}

int jail_seccomp_prepare(void)
{
	scmp_filter_ctx ctx;
	int rc;

	if (prepared)
		return 0;
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return -ENOMEM;
	rc = add_rules(ctx);
	if (rc == 0)
		rc = export_bpf(ctx);
	seccomp_release(ctx);
	prepared = rc == 0;
	return rc;
}

int jail_seccomp_apply(void)
{
	if (!prepared)
		return -EINVAL;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0)
		return 0;
	if (errno != ENOSYS)
		return -errno;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0 ? -errno : 0;
}

int jail_seccomp_install(void)
{
	int rc = jail_seccomp_prepare();

	return rc < 0 ? rc : jail_seccomp_apply();
}
