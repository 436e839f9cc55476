/* confine.c -- the gateway's seccomp allowlist (confine.h).
 *
 * space-gw parses ClientHellos, HTTP and DNS from a guest that runs as root, from the host's
 * network namespace: a bug there must not become a shell on the host. Unlike QEMU's (a
 * denylist, src/daemon/vmm/seccomp.c: what QEMU needs varies with accelerator and devices),
 * the gateway's needs are few and known, so this is an allowlist: what libevent, OpenSSL,
 * jansson and glibc call once the sockets are open, the CA bundle read and privileges dropped
 * (found with strace over tests/e2e/test_gateway.py, checked by tests/unit/test_gw_confine.c). */
#include "confine.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>


/* Calls allowed whatever their arguments. */
static const int plain[] = {
	/* bytes: sockets, the log, the audit file */
	SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(recvfrom),
	SCMP_SYS(recvmsg), SCMP_SYS(sendto), SCMP_SYS(sendmsg), SCMP_SYS(close), SCMP_SYS(shutdown),
	SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(renameat), SCMP_SYS(renameat2),
	/* sockets already of an allowed family (socket() itself is checked below) */
	SCMP_SYS(connect), SCMP_SYS(accept), SCMP_SYS(accept4), SCMP_SYS(getsockopt),
	SCMP_SYS(setsockopt), SCMP_SYS(getsockname), SCMP_SYS(getpeername),
	/* the event loop */
	SCMP_SYS(epoll_wait), SCMP_SYS(epoll_pwait), SCMP_SYS(epoll_ctl), SCMP_SYS(epoll_create1),
	/* time, memory, locks, randomness */
	SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(gettimeofday), SCMP_SYS(time),
	SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep), SCMP_SYS(brk), SCMP_SYS(munmap),
	SCMP_SYS(mremap), SCMP_SYS(madvise), SCMP_SYS(futex), SCMP_SYS(getrandom),
	/* signals (SIGTERM's handler, libevent's signal pipe), the process itself, its end */
	SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn), SCMP_SYS(sigaltstack),
	SCMP_SYS(restart_syscall), SCMP_SYS(getpid), SCMP_SYS(gettid), SCMP_SYS(sched_yield),
	SCMP_SYS(exit), SCMP_SYS(exit_group),
};

/* The sanitizer runtime's own, in the ASan build only: at exit LeakSanitizer clones a tracer
 * task (same memory, no namespaces) that ptrace-attaches to this one process and reads
 * /proc/self; reports go to files its options name. */
#ifdef __SANITIZE_ADDRESS__
#define GW_SANITIZED 1
static const int sanitizer[] = {
	SCMP_SYS(wait4), SCMP_SYS(getppid), SCMP_SYS(getdents), SCMP_SYS(getdents64), SCMP_SYS(stat),
	SCMP_SYS(lstat), SCMP_SYS(access), SCMP_SYS(readlink), SCMP_SYS(readlinkat),
	SCMP_SYS(lseek), SCMP_SYS(pread64), SCMP_SYS(sched_getaffinity), SCMP_SYS(mincore),
};
#else
#define GW_SANITIZED 0
#endif

#define NS_FLAGS (CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | \
		  CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_NEWTIME)

static int add_list(scmp_filter_ctx ctx, const int *nr, size_t n)
{
	int rc;

	for (size_t i = 0; i < n; i++)
		if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr[i], 0)) < 0)
			return rc;
	return 0;
}

/* Calls allowed for some arguments only; rules are alternatives (OR), the comparisons within
 * one rule all hold (AND). */
static int add_conditional(scmp_filter_ctx ctx)
{
	static const int families[] = { AF_INET, AF_INET6, AF_UNIX };
	static const int fcntls[] = { F_GETFL, F_SETFL, F_GETFD, F_SETFD };
	static const int prctls[] = { PR_GET_DUMPABLE, PR_SET_DUMPABLE, PR_SET_PTRACER, PR_SET_PDEATHSIG };
	const scmp_datum_t self = (scmp_datum_t)getpid();
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < sizeof(families) / sizeof(families[0]); i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				      SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[i]));
	for (size_t i = 0; rc == 0 && i < sizeof(fcntls) / sizeof(fcntls[0]); i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 1,
				      SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)fcntls[i]));
	/* libevent asks how much a socket holds before reading it */
	rc = rc ? rc : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_EQ, FIONREAD));
	/* files only for writing (the audit log and its rotation; sanitizer reports, which the
	 * sanitizer runtime opens with open(2), not openat) */
	rc = rc ? rc : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
					SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE, O_WRONLY));
	rc = rc ? rc : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(open), 1,
					SCMP_A1(SCMP_CMP_MASKED_EQ, O_ACCMODE, O_WRONLY));
	/* memory, never executable */
	rc = rc ? rc : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
					SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	rc = rc ? rc : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
					SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	/* raise() and abort(): signals to itself only */
	rc = rc ? rc : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, self));
	rc = rc ? rc : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1, SCMP_A0(SCMP_CMP_EQ, self));
	if (rc || !GW_SANITIZED)
		return rc;
	rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(open), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, O_ACCMODE, O_RDONLY));
	rc = rc ? rc : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
					SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE, O_RDONLY));
	rc = rc ? rc : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, NS_FLAGS, 0));
	rc = rc ? rc : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ptrace), 1, SCMP_A1(SCMP_CMP_EQ, self));
	rc = rc ? rc : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 1, SCMP_A0(SCMP_CMP_EQ, 0));
	for (size_t i = 0; rc == 0 && i < sizeof(prctls) / sizeof(prctls[0]); i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
				      SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)prctls[i]));
	return rc;
}

int gw_confine_seccomp(space_err *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	int rc;

	if (!ctx)
		return err_set(err, ENOMEM, "seccomp_init");
	rc = add_list(ctx, plain, sizeof(plain) / sizeof(plain[0]));
#if GW_SANITIZED
	rc = rc ? rc : add_list(ctx, sanitizer, sizeof(sanitizer) / sizeof(sanitizer[0]));
#endif
	rc = rc ? rc : add_conditional(ctx);
	/* (other architectures' calls, i386 or x32, are killed: libseccomp's default) */
	rc = rc ? rc : seccomp_load(ctx);
	seccomp_release(ctx);
	return rc < 0 ? err_sys(err, -rc, "seccomp allowlist") : 0;
}
