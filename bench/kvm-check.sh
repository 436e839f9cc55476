#!/bin/sh
# kvm-check.sh -- the lifecycle benchmark under KVM, on a host whose /dev/kvm boots our guest.
#
# Every figure the project's own machines give is TCG (their /dev/kvm is paravirtual and cannot
# boot a normal guest). On a host with a working KVM this builds everything, installs the bench's
# packages (gVisor's runsc), checks /dev/kvm answers the KVM API, and runs bench/lifecycle.py
# with --accel kvm: the same table as under TCG (the daemon refuses to report another
# accelerator than the one asked for, so a TCG figure cannot pass for a KVM one).
#
#     sudo bench/kvm-check.sh [lifecycle.py options, e.g. --clone 100 --pool 100]
set -eu
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
	echo "kvm-check: run as root (the daemon makes network namespaces and cgroups)" >&2
	exit 2
fi
if [ ! -c /dev/kvm ] || [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
	echo "kvm-check: no usable /dev/kvm here: nothing to measure (bench/lifecycle.py measures TCG)" >&2
	exit 2
fi
# KVM_GET_API_VERSION (_IO(0xAE, 0)) must answer 12, as the daemon's own probe checks first. A
# paravirtual /dev/kvm (PVM) answers 12 too and still cannot boot our guest: there the bench
# stops at its first wait for a template's ready snapshot, with the daemon's log.
api=$(python3 -c 'import fcntl, os; fd = os.open("/dev/kvm", os.O_RDWR); print(fcntl.ioctl(fd, 0xAE00))' 2>&1) || api="error: $api"
if [ "$api" != 12 ]; then
	echo "kvm-check: /dev/kvm answers KVM_GET_API_VERSION with $api, not 12" >&2
	exit 2
fi
echo "kvm-check: $(uname -srm), $(nproc) CPUs, /dev/kvm API 12; building ..."
make -j"$(nproc)" all bench-deps
exec python3 bench/lifecycle.py --accel kvm "$@"
