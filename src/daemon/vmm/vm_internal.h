/* vm_internal.h -- struct vm, shared by vm.c (process life) and vm_ctl.c (QMP control) */
#ifndef SPACE_VM_INTERNAL_H
#define SPACE_VM_INTERNAL_H

#include <limits.h>

#include "cgroup.h"
#include "console.h"
#include "qmp.h"
#include "vm.h"

/* A control call waiting for QEMU (or for space-memcvt). Owned by the vm's
 * list until it completes; `cancelled` when its owner went away. */
struct vm_call {
	struct vm *vm;
	vm_done_cb done;
	vm_str_cb str;
	void *arg;
	bool cancelled;
	struct vm_call *next;
};

/* vm_save in progress: QEMU migrates into space-memcvt. Done when both the
 * migration completed and the converter exited 0. */
struct vm_saving {
	struct vm_call *call;
	pid_t pid;
	int pidfd;
	struct event *exit_ev;
	int out_fd;            /* the converter's stdout and stderr */
	int spawn_fd;          /* why it failed before exec, if it did */
	bool migrated, converted;
	char why[512];         /* first failure */
	int64_t t0;
};

struct vm {
	struct event_base *base;
	char id[72];
	pid_t pid;
	uint64_t pid_start;
	int pidfd;
	struct event *exit_ev;  /* pidfd readable: the process is gone */
	struct event *kill_ev;  /* SIGKILL after the grace period */
	struct event *start_ev; /* launch deadline */
	struct qmp *qmp;
	struct console *con;
	struct vm_events ev;
	void *arg;
	bool exited;
	bool killing;
	bool ready;             /* `ready` was reported (or the vm was adopted) */
	int incoming_fd;        /* launch: the state still to hand to QEMU, -1 when none */
	int spawn_fd;           /* launch: why the child failed before exec, if it did (-1: none) */
	int64_t t0;
	/* vm_free() from a callback that on_qemu_exit() runs is deferred. */
	int depth;
	bool free_pending;
	char reason[256];
	char agent_path[PATH_MAX];
	char qemu_log[PATH_MAX];
	struct vm_call *calls;
	struct vm_saving *saving;
	/* Confinement, undone when QEMU is gone (vm_confinement_undo). */
	bool jailed;
	uid_t uid;
	gid_t gid;
	char jail_dir[PATH_MAX]; /* "" when not jailed */
	struct vm_cgroup cg;     /* n == 0: no cgroup */
	char disk[PATH_MAX];     /* the layer QEMU writes now (vm_freeze_disk moves it) */
	char frozen[PATH_MAX];   /* vm_freeze_disk: the layer becoming read-only */
};

/* vm_ctl.c */
struct vm_call *vm_call_new(struct vm *vm, vm_done_cb done, vm_str_cb str, void *arg);
/* Completes a call (unless cancelled) and frees it. err NULL: success. */
void vm_call_finish(struct vm_call *c, const space_err *err, const char *value);
/* QEMU exited or the vm is freed: every call still owed fails with why
 * (not reported when `report` is false). */
void vm_calls_abort(struct vm *vm, const char *why, bool report);
/* A QMP event, for the control calls that wait on one (MIGRATION). */
void vm_ctl_event(struct vm *vm, const char *event, json_t *data);
/* Incoming launch: set capabilities, pass the state, migrate-incoming. */
int vm_ctl_incoming(struct vm *vm, space_err *err);

/* vm.c */
/* QEMU is gone: its jail root and cgroup leaf go too. */
void vm_confinement_undo(struct vm *vm);
/* The launch finished: report `ready` once. */
void vm_launch_done(struct vm *vm);
/* The launch cannot finish: kill QEMU; `exited` will say why. */
void vm_launch_fail(struct vm *vm, const char *why);

#endif
