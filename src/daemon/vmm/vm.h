/* vm.h -- one QEMU -M microvm process per sandbox: launch (cold or from a snapshot), adopt,
 * control (pause, resume, freeze the disk, save memory and devices), watch, kill */
#ifndef SPACE_VM_H
#define SPACE_VM_H

#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

enum accel { ACCEL_TCG, ACCEL_KVM };
const char *accel_name(enum accel a);

/* Guest RAM: anonymous memory (a cold boot), or a private copy-on-write
 * mapping of a snapshot's memory image: pages nobody wrote stay shared with
 * every other VM mapping the same image. */
enum vm_mem { VM_MEM_ANON, VM_MEM_IMAGE };

struct vm_spec {
	const char *id;          /* sandbox id; also QEMU's -name, checked on adoption */
	const char *run_dir;     /* the VM's logs: console.log, qemu.log */
	const char *sock_dir;    /* short path for agent.sock, qmp.sock, console.sock (sun_path limit) */
	const char *kernel;      /* vmlinuz */
	const char *disk;        /* the qcow2 layer the VM writes; it must exist */
	enum vm_mem mem;
	const char *mem_image;   /* VM_MEM_IMAGE: the snapshot's memory image */
	/* The image is this VM's alone (no other VM maps it: a suspend
	 * snapshot): a jailed VM gets it bound read-write into its jail
	 * instead of a sealed copy, which would cost a copy of the image. */
	bool mem_own;
	const char *incoming;    /* device state to resume (a vm_save() state file); NULL: cold boot */
	int vcpus;
	int memory_mib;
	enum accel accel;
	int tb_size_mib;         /* TCG translation cache size */
	const char *cmdline_extra; /* appended to the kernel command line, may be NULL */
	bool netns;              /* start QEMU in a new network namespace */
	/* The sandbox's named netns (docs/design/egress.md): QEMU gets its TAP
	 * as a descriptor and a virtio-net device on it. NULL: no network
	 * device (the KVM probe). Needs netns. A VM restored from a snapshot
	 * must have the device exactly when the snapshot's VM had it. */
	const char *net_ns;
	/* Confinement (docs/design/jail.md). jail: QEMU runs as run_uid/run_gid
	 * (non-zero, one per VM) in a mount namespace rooted at jail_dir
	 * (a path only root can reach; vm_launch mounts it), with an empty
	 * environment, no capabilities, no_new_privs, our seccomp denylist and
	 * QEMU's own -sandbox; a memory image is mapped from a sealed memfd.
	 * Without jail QEMU runs as the daemon's user (unsafe; for debugging).
	 * vm_adopt checks that the process runs as run_uid (0 without jail). */
	bool jail;
	uid_t run_uid;
	gid_t run_gid;
	const char *jail_dir;
	/* Directories the layers below the top may live in (canonical,
	 * NULL-terminated; see jail.h): a backing file elsewhere fails the
	 * launch. */
	const char *const *layer_dirs;
	/* A cgroup leaf per VM (memory, CPU, tasks) named by the id under
	 * this scope ("space-<tag>") in the daemon's own cgroup; NULL: none. */
	const char *cgroup_scope;
};

struct vm;

/* What a vm reports, always from the event loop, never from inside the call
 * that caused it. `exited` comes exactly once, when the process is gone for
 * any reason ("exited with status 1", "killed by signal 9", or why a start
 * failed); the vm stays valid until vm_free(), which the callbacks may call. */
struct vm_events {
	/* vm_launch: QEMU answers QMP and, for an incoming state, the guest
	 * runs again. Not called for vm_adopt. */
	void (*ready)(struct vm *vm, void *arg);
	void (*exited)(struct vm *vm, const char *reason, void *arg);
	/* A QMP event worth knowing about: STOP, RESUME, SHUTDOWN, RESET,
	 * GUEST_PANICKED, MIGRATION (data: {"status": ...}). data is borrowed.
	 * May be NULL. */
	void (*event)(struct vm *vm, const char *event, json_t *data, void *arg);
};

/* Starts QEMU and returns once the process exists; nothing here waits on
 * QEMU. The listening sockets are made (and bound) by us and inherited, so
 * connecting never races QEMU's start. With spec->incoming the VM is
 * started paused, its device state loaded (x-ignore-shared: RAM comes from
 * spec->mem_image) and continued; then `ready`. A start that does not reach
 * `ready` within timeout_ms is killed (then `exited` says why). */
int vm_launch(struct event_base *base, const struct vm_spec *spec, int timeout_ms,
	      const struct vm_events *ev, void *arg, struct vm **out, space_err *err);

/* Re-attaches to a QEMU that outlived a daemon restart: checks that `pid`
 * with start time `pid_start` is alive and is the QEMU of sandbox `spec->id`,
 * then watches it. Blocks for the QMP handshake (bounded); for start-up
 * only. ESRCH if it is gone. */
int vm_adopt(struct event_base *base, const struct vm_spec *spec, int pid, uint64_t pid_start,
	     const struct vm_events *ev, void *arg, struct vm **out, space_err *err);

int vm_pid(const struct vm *vm);
uint64_t vm_pid_start(const struct vm *vm);
/* The unix socket of the agent's virtio-serial port (QEMU listens on it). */
const char *vm_agent_path(const struct vm *vm);
const char *vm_id(const struct vm *vm);

/* ---- control (vm_ctl.c). Each completes through cb(vm, err, arg) from the
 * loop: err NULL on success, else why. At most one vm_save at a time. ---- */
typedef void (*vm_done_cb)(struct vm *vm, const space_err *err, void *arg);

/* vCPUs stop / run again ("stop" / "cont"). */
int vm_pause(struct vm *vm, vm_done_cb cb, void *arg, space_err *err);
int vm_resume(struct vm *vm, vm_done_cb cb, void *arg, space_err *err);
/* The disk layer the VM writes becomes read-only: QEMU creates new_top (a
 * qcow2 whose backing file is the old layer) and writes there from now on
 * (blockdev-snapshot-sync). Call with the VM paused to freeze one instant.
 * new_top gets a backing record (qcow2.h); for a jailed VM it is made by us
 * first (its uid, 0600) and bound into the jail, and the old layer becomes
 * root's 0644 afterwards. */
int vm_freeze_disk(struct vm *vm, const char *new_top, vm_done_cb cb, void *arg, space_err *err);
/* Saves guest memory and device state, the VM paused: QEMU migrates into
 * `space-memcvt`, which writes the memory image to image_fd and the device
 * state to state_fd (both owned by the call from now on, also on failure).
 * The VM stays paused afterwards. */
int vm_save(struct vm *vm, int image_fd, int state_fd, vm_done_cb cb, void *arg, space_err *err);
/* The file QEMU writes the root disk to now (query-block), for reconciling
 * after a restart that interrupted vm_freeze_disk. */
typedef void (*vm_str_cb)(struct vm *vm, const char *value, const space_err *err, void *arg);
int vm_disk_top(struct vm *vm, vm_str_cb cb, void *arg, space_err *err);
/* QEMU's run state ("running", "paused", "inmigrate", "postmigrate", ...). */
int vm_status(struct vm *vm, vm_str_cb cb, void *arg, space_err *err);
/* Cancels a callback a control call still owes: it will not run (for an owner
 * going away). */
void vm_forget(struct vm *vm, void *arg);

/* Asks QEMU to quit now (QMP quit, SIGKILL after a grace period). `exited`
 * fires when the process is gone. */
void vm_kill(struct vm *vm);
/* Stops watching and frees; the process is left alone (used at shutdown). */
void vm_free(struct vm *vm);

typedef void (*qmp_reply_cb)(json_t *reply, const char *error, void *arg);
/* Sends a QMP command (args may be NULL; reference stolen). cb may be NULL. */
int vm_qmp(struct vm *vm, const char *command, json_t *args, qmp_reply_cb cb, void *arg,
	   space_err *err);

/* What a VM left behind when it is gone for good (its jail root, its cgroup
 * leaf): removed. For a VM that ended while no daemon watched it. */
void vm_remove_confinement(const struct vm_spec *spec);

/* Removes the VM's own files: run_dir and sock_dir (never its disk). */
int vm_remove_files(const struct vm_spec *spec, space_err *err);
/* rm -r without a shell, never following symlinks or leaving the file
 * system; refuses "/" and relative paths. */
int vm_rm_tree(const char *path, space_err *err);

/* /proc/<pid>/stat starttime, 0 if the process does not exist. */
uint64_t proc_start_time(int pid);

/* `space-memcvt`: $SPACE_MEMCVT, else next to the running binary. */
const char *vm_memcvt_binary(void);

/* Chooses the accelerator: KVM when /dev/kvm opens and a probe boot of
 * `kernel` + `image` reaches the agent within timeout_ms (the agent prints
 * SPACE-PROBE-OK on the console when the kernel command line has
 * space.probe=1), else TCG. Blocking; call once at start-up. `reason` gets
 * one line for the log and /v1/info. */
/* uid non-zero: the probe QEMU runs jailed like a VM (jail.md), as uid,
 * in a jail root under work_dir. */
enum accel accel_probe(const char *kernel, const char *image, const char *work_dir, uid_t uid, int timeout_ms,
		       char *reason, size_t reason_len);

#endif
