"""port_flood.py -- run as root in a `base` guest: play a hostile agent on the agent's own port.

Takes space-agent's (PID 1) descriptor of the virtio-serial port with pidfd_getfd, stops PID 1
with PTRACE_SEIZE + PTRACE_INTERRUPT so nothing in the guest reads the port, and writes
A_DATA frames for channels no session owns (each earns an H_ACK from the daemon) until the
daemon stops reading, then a second A_HELLO. After HOLD seconds PID 1 is let go, reads what the
daemon queued, and the channel recovers. Prints what it did when it is over. Needs
agentport.py before it (space.guest_script).

argv: MIB HOLD_S"""
import os
import struct
import sys
import time

A_HELLO, A_DATA = 101, 103


def main():
    mib, hold = int(sys.argv[1]), float(sys.argv[2])
    fd = take_port()
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
    stop_pid1()
    t0 = time.monotonic()
    time.sleep(hold)
    release_pid1()
    os.waitpid(child, 0)
    print(f"held PID 1 for {time.monotonic() - t0:.1f}s; wrote {mib} MiB of frames and an A_HELLO",
          flush=True)


main()
