/* vm.h -- one QEMU -M microvm process per sandbox: launch, adopt, watch, kill */
#ifndef SPACE_VM_H
#define SPACE_VM_H

#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"

enum accel { ACCEL_TCG, ACCEL_KVM };
const char *accel_name(enum accel a);

struct vm_spec {
	const char *id;          /* sandbox id; also QEMU's -name, checked on adoption */
	const char *run_dir;     /* persistent per-sandbox files: overlay.qcow2, console.log, qemu.log */
	const char *sock_dir;    /* short path for agent.sock, qmp.sock, console.sock (sun_path limit) */
	const char *mem_path;    /* guest RAM file on tmpfs (memory-backend-file, share=on) */
	const char *kernel;      /* vmlinuz */
	const char *base_image;  /* read-only template rootfs (raw ext4): qcow2 backing file */
	int vcpus;
	int memory_mib;
	enum accel accel;
	int tb_size_mib;         /* TCG translation cache size */
	const char *cmdline_extra; /* appended to the kernel command line, may be NULL */
	bool netns;              /* start QEMU in a new network namespace */
	/* Hardening hooks (next issues): drop QEMU to this uid/gid (0: keep), join
	 * this cgroup directory (NULL: none), install a seccomp filter. */
	uid_t run_uid;
	gid_t run_gid;
	const char *cgroup_dir;
	bool seccomp;
};

struct vm;

/* Called once when the QEMU process is gone (for any reason), from the event
 * loop. `reason` says how it ended ("exited with status 1", "killed by signal
 * 9"). The vm stays valid until vm_free(). */
typedef void (*vm_exit_cb)(struct vm *vm, const char *reason, void *arg);

/* Creates the qcow2 overlay (if missing) and starts QEMU. Returns once the
 * process is running and the QMP socket answers; the guest boots on. */
int vm_launch(struct event_base *base, const struct vm_spec *spec, vm_exit_cb cb, void *arg,
	      struct vm **out, space_err *err);

/* Re-attaches to a QEMU that outlived a daemon restart: checks that `pid`
 * with start time `pid_start` is alive and is the QEMU of sandbox `spec->id`,
 * then watches it as vm_launch would. ESRCH if it is gone. */
int vm_adopt(struct event_base *base, const struct vm_spec *spec, int pid, uint64_t pid_start,
	     vm_exit_cb cb, void *arg, struct vm **out, space_err *err);

int vm_pid(const struct vm *vm);
uint64_t vm_pid_start(const struct vm *vm);
/* The unix socket of the agent's virtio-serial port (QEMU listens on it). */
const char *vm_agent_path(const struct vm *vm);

/* Asks QEMU to quit now (QMP quit, SIGKILL after a grace period). The exit
 * callback fires when the process is gone. */
void vm_kill(struct vm *vm);
/* Stops watching and frees; the process is left alone (used at shutdown). */
void vm_free(struct vm *vm);

typedef void (*qmp_reply_cb)(json_t *reply, const char *error, void *arg);
/* Sends a QMP command (args may be NULL; reference stolen). cb may be NULL. */
int vm_qmp(struct vm *vm, const char *command, json_t *args, qmp_reply_cb cb, void *arg,
	   space_err *err);

/* Removes what a sandbox left on disk: run_dir, sock_dir and mem_path. */
int vm_remove_files(const struct vm_spec *spec, space_err *err);

/* /proc/<pid>/stat starttime, 0 if the process does not exist. */
uint64_t proc_start_time(int pid);

/* Chooses the accelerator: KVM when /dev/kvm opens and a probe boot of
 * `kernel` + `image` reaches the agent within timeout_ms (the agent prints
 * SPACE-PROBE-OK on the console when the kernel command line has
 * space.probe=1), else TCG. Blocking; call once at start-up. `reason` gets
 * one line for the log and /v1/info. */
enum accel accel_probe(const char *kernel, const char *image, const char *work_dir, int timeout_ms,
		       char *reason, size_t reason_len);

#endif
