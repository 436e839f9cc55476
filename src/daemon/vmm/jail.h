/* jail.h -- what confines a QEMU: its own uid, a mount namespace holding only its files, no
 * capabilities, no_new_privs, a seccomp denylist. The daemon-side half builds and tears down the
 * jail's root; the child-side half (proc.c calls it between fork and exec) enters it. */
#ifndef SPACE_JAIL_H
#define SPACE_JAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

/* Per-VM uids: base + slot, slot in [0, count). The gid is the same number. */
#define JAIL_UID_BASE_DEFAULT 2000000000u
#define JAIL_UID_COUNT_DEFAULT 65536u

/* The lowest uid of [base, base + count) not in used[0..n); -1 (EAGAIN) if
 * all are taken. Pure. */
int jail_uid_pick(uint32_t base, uint32_t count, const uint32_t *used, size_t n, uint32_t *out);

/* What a jail root holds (daemon side). */
struct jail_files {
	const char *kernel;
	const char *disk;      /* the top layer: read-write, owned by the VM uid, 0600 */
	bool kvm;              /* /dev/kvm */
	uid_t uid;
	gid_t gid;
	/* Where layers below the top may live (canonical directories,
	 * NULL-terminated). A layer's header names its backing file, and a
	 * compromised QEMU writes the header of its top layer: a backing
	 * file outside these directories, or not root's (another VM's live
	 * top), is refused, never bound in nor chmod'ed. */
	const char *const *layer_dirs;
	/* The KVM probe: its disk is a template image, bound read-only and
	 * left as it is, and QEMU gets a small writable /var/tmp (tmpfs, the
	 * VM's) for the overlay of -drive snapshot=on. */
	bool disk_ro;
	bool scratch;
};

/* Mounts a small tmpfs at root (a directory the caller made, root-only above
 * it), shared so that later binds reach the VM's namespace, holding
 * read-only /usr (and the /lib, /bin links), /etc/ld.so.cache, a minimal
 * /dev, an empty /proc to mount on, the kernel, and every layer of the
 * disk's backing chain at its host path: the top read-write and chowned to
 * the VM uid (0600), the layers below read-only (made root-owned 0644, so
 * any VM whose chain reaches them can read them). A stale jail at root is
 * torn down first. */
int jail_build(const char *root, const struct jail_files *f, space_err *err);

/* Is path (canonical) inside one of dirs (NULL-terminated), below it? Pure. */
bool jail_layer_allowed(const char *path, const char *const *dirs);

/* Makes host file `path` appear at the same path inside the jail at root
 * (a bind mount; it propagates into the running VM's namespace). */
int jail_bind_file(const char *root, const char *path, bool rw, space_err *err);

/* Hands host file `path` to the VM: owned by uid/gid, 0600, bound
 * read-write into the jail at root at its host path. */
int jail_own_file(const char *root, const char *path, uid_t uid, gid_t gid, space_err *err);

/* Unmounts (lazily) and removes a jail root; gone already is fine. */
int jail_teardown(const char *root, space_err *err);

/* Tears down every jail root under dir whose name keep() does not claim
 * (VMs gone while no daemon watched them); returns how many went. */
int jail_clean_orphans(const char *dir, bool (*keep)(const char *id, void *arg), void *arg);

/* The disk layer path becomes a read-only layer others may read: root:root
 * 0644 (after vm_freeze_disk moved the VM off it). */
int jail_release_layer(const char *path, space_err *err);

/* ---- child side (after fork, before exec; async-signal-safe enough for
 * a fork of the single-threaded daemon). Each returns 0 or -1 with errno
 * set and *step naming what failed. ---- */

/* New mount (and IPC, UTS) namespace; every mount a slave of the host's;
 * /proc mounted showing only the processes of our own uid (subset=pid,
 * hidepid=invisible); pivot_root into root; the old root detached. */
int jail_enter(const char *root, const char **step);

/* No way back to privileges: capability bounding set emptied, ambient
 * capabilities cleared, securebits locked (no root privileges from uid 0 or
 * setuid binaries), supplementary groups dropped, then setresgid/setresuid
 * to uid/gid (which clears the permitted and effective sets), and
 * no_new_privs. */
int jail_drop_privileges(uid_t uid, gid_t gid, const char **step);

/* /proc/<pid>/status: the four uids (real, effective, saved, fs) are all
 * `uid`. false if unreadable. */
bool jail_pid_has_uid(int pid, uid_t uid);

#endif
