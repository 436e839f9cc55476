"""port_flood.py -- run as root in a `base` guest: play a hostile agent on the agent's own port.

Takes space-agent's (PID 1) descriptor of the virtio-serial port with pidfd_getfd, stops PID 1
with PTRACE_SEIZE + PTRACE_INTERRUPT so nothing in the guest reads the port, and writes
A_DATA frames for channels no session owns (each earns an H_ACK from the daemon) until the
daemon stops reading, then a second A_HELLO. After HOLD seconds PID 1 is let go, reads what the
daemon queued, and the channel recovers. Prints what it did when it is over.

argv: MIB HOLD_S"""
import ctypes
import os
import struct
import sys
import time

SYS_pidfd_open, SYS_pidfd_getfd, SYS_ptrace = 434, 438, 101
PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 17, 0x4206, 0x4207
A_HELLO, A_DATA = 101, 103

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def sys_call(*args):
    r = libc.syscall(*[ctypes.c_long(a) for a in args])
    if r < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return r


def port_fd():
    for name in os.listdir("/proc/1/fd"):
        try:
            if os.readlink(f"/proc/1/fd/{name}").startswith("/dev/vport"):
                return int(name)
        except OSError:
            pass
    raise SystemExit("no /dev/vport* open in PID 1")


def frame(typ, chan, payload):
    return struct.pack("<IHHI", len(payload), typ, 0, chan) + payload


def main():
    mib, hold = int(sys.argv[1]), float(sys.argv[2])
    target = port_fd()
    pidfd = sys_call(SYS_pidfd_open, 1, 0)
    fd = sys_call(SYS_pidfd_getfd, pidfd, target, 0)
    # 16 KiB of zero-byte A_DATA frames, each for another channel: coalescing cannot merge them.
    block = b"".join(frame(A_DATA, 1000000 + i, struct.pack("<B7xQ", 1, 0)) for i in range(585))
    hello = frame(A_HELLO, 0, struct.pack("<II", 1, 0))
    child = os.fork()
    if child == 0:
        # The writer: blocks once the daemon stops reading and the virtqueue is full.
        time.sleep(0.5)
        sent = 0
        while sent < mib << 20:
            sent += os.write(fd, block)
        os.write(fd, hello)
        os._exit(0)
    sys_call(SYS_ptrace, PTRACE_SEIZE, 1, 0, 0)
    sys_call(SYS_ptrace, PTRACE_INTERRUPT, 1, 0, 0)
    os.waitpid(1, os.__dict__.get("WALL", 0x40000000))
    t0 = time.monotonic()
    time.sleep(hold)
    sys_call(SYS_ptrace, PTRACE_DETACH, 1, 0, 0)
    os.waitpid(child, 0)
    print(f"held PID 1 for {time.monotonic() - t0:.1f}s; wrote {mib} MiB of frames and an A_HELLO",
          flush=True)


main()
