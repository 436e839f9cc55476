/* vm_argv.h -- the QEMU command line for a vm_spec (pure functions, unit-tested) */
#ifndef SPACE_VM_ARGV_H
#define SPACE_VM_ARGV_H

#include <limits.h>

#include "proc.h"
#include "vm.h"

/* Binaries: $SPACE_QEMU / $SPACE_QEMU_IMG override the PATH lookup. */
const char *vm_qemu_binary(void);
const char *vm_qemu_img_binary(void);

/* Files a VM uses, derived from the spec. */
enum vm_file { VM_AGENT_SOCK, VM_QMP_SOCK, VM_CONSOLE_SOCK, VM_CONSOLE_LOG, VM_QEMU_LOG };

/* The listening sockets QEMU inherits, in this order, as fds 3, 4, 5
 * (vm_launch binds them; the chardevs name them by number). */
#define VM_FD_AGENT 3
#define VM_FD_QMP 4
#define VM_FD_CONSOLE 5
/* A jailed VM's memory image: the sealed memfd, mapped by /proc/self/fd/6. */
#define VM_FD_MEM 6
/* The TAP of the sandbox's netns (proc.c opens it in the child). Above the
 * passed sockets and the memfd. */
#define VM_FD_TAP 7
/* migrate-incoming / migrate take their descriptor by this getfd name. */
#define VM_FD_MIGRATION "space-migration"
int vm_file_path(const struct vm_spec *spec, enum vm_file f, char out[PATH_MAX]);

/* The value that follows -name: "guest=<id>,..." (adoption looks for it). */
#define VM_NAME_KEY "guest="

/* -M for every VM: microvm without PCI or option ROMs, virtio-mmio devices
 * listed on the kernel command line by QEMU (acpi=off: the guest kernel has
 * no ACPI); PIT and RTC on, the kernel hangs under TCG without them. Never
 * accel= here: it conflicts with -accel. */
#define VM_MACHINE "microvm,x-option-roms=off,rtc=on,pit=on,isa-serial=on,acpi=off"

/* Checks what QEMU would otherwise reject late or misparse (EINVAL). */
int vm_spec_check(const struct vm_spec *spec, space_err *err);

/* Fills argv (argv[0] = qemu) for spec: a cold boot, or with spec->incoming
 * a VM that waits for its state (-incoming defer). */
int vm_argv_build(const struct vm_spec *spec, const char *qemu, struct strv *argv, space_err *err);

/* The KVM probe boot (accel.c): kernel + image read-only under -accel kvm,
 * serial console on QEMU's stdout, space.probe=1 on the command line. */
int vm_probe_argv_build(const char *qemu, const char *kernel, const char *image, bool sandbox, struct strv *a,
			space_err *err);

/* The guest kernel command line for spec (NUL-terminated into out). */
int vm_kernel_cmdline(const struct vm_spec *spec, char *out, size_t len, space_err *err);

/* A value inside a QEMU option list ("a=b,c=d") with each ',' doubled.
 * Returns a malloc'd string or NULL. */
char *qemu_opt_escape(const char *s);

#endif
