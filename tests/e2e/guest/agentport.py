"""agentport.py -- what the guest programs that play a hostile agent share (port_flood.py,
forge_agent.py; tests prepend it to them with space.guest_script): the syscalls, PID 1's
descriptor of the agent's virtio-serial port, taking PID 1 out of the way, and agent frames.
Runs as root in a `base` guest."""
import ctypes
import os
import struct

SYS_pidfd_open, SYS_pidfd_getfd, SYS_ptrace = 434, 438, 101
PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 17, 0x4206, 0x4207
WALL = 0x40000000
HDR = struct.Struct("<IHHI")

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def sys_call(*args):
    r = libc.syscall(*[ctypes.c_long(a) for a in args])
    if r < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return r


def port_fd():
    """PID 1's descriptor number of the agent port."""
    for name in os.listdir("/proc/1/fd"):
        try:
            if os.readlink(f"/proc/1/fd/{name}").startswith("/dev/vport"):
                return int(name)
        except OSError:
            pass
    raise SystemExit("no /dev/vport* open in PID 1")


def take_port():
    """A descriptor of our own for PID 1's agent port (pidfd_getfd)."""
    target = port_fd()
    pidfd = sys_call(SYS_pidfd_open, 1, 0)
    return sys_call(SYS_pidfd_getfd, pidfd, target, 0)


def stop_pid1():
    """PID 1 stops (PTRACE_SEIZE + INTERRUPT): nothing in the guest reads the port but us."""
    sys_call(SYS_ptrace, PTRACE_SEIZE, 1, 0, 0)
    sys_call(SYS_ptrace, PTRACE_INTERRUPT, 1, 0, 0)
    os.waitpid(1, WALL)


def release_pid1():
    sys_call(SYS_ptrace, PTRACE_DETACH, 1, 0, 0)


def frame(typ, chan, payload):
    return HDR.pack(len(payload), typ, 0, chan) + payload
