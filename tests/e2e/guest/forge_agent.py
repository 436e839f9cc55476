"""forge_agent.py -- run as root in a `base` guest: answer the daemon's file operations as a
hostile agent would, with replies whose framing lies. Needs agentport.py before it
(space.guest_script).

Takes space-agent's (PID 1) descriptor of the virtio-serial port with pidfd_getfd and stops
PID 1 with PTRACE_SEIZE + PTRACE_INTERRUPT, so that every frame the daemon sends from then on
reaches this program instead (it says so first, on stdout). For SECONDS, each channel the
daemon opens whose operation (argv[0]) the plan names is answered with A_STARTED, the plan's bytes as its stdout, and
A_EXIT 0; every other frame is read and dropped. Then PID 1 is let go, at a frame boundary so
that it reads whole frames. Prints what it answered when it is over.

argv: SECONDS PLAN, PLAN a JSON object {operation: base64 of the stdout to send}, e.g.
{"read": b64('{"size":5,"offset":0,"length":5}\\nhello' + a forged HTTP reply)}."""
import base64
import json
import os
import select
import struct
import sys
import time

H_OPEN = 12
A_STARTED, A_DATA, A_EXIT = 102, 103, 104
KIND_FILE = 3
CHUNK = 65536 - 16


def open_argv(payload):
    """argv of an H_OPEN of a file channel (kind, then an H_EXEC payload), or None."""
    if len(payload) < 24:
        return None
    kind, _flags, _uid, _gid, argc, envc = struct.unpack_from("<IIIIII", payload)
    if kind != KIND_FILE:
        return None
    strings = payload[24:].split(b"\0")
    return [s.decode(errors="replace") for s in strings[2:2 + argc]]


def answer(fd, chan, out):
    os.write(fd, frame(A_STARTED, chan, struct.pack("<I", 4242)))
    for off in range(0, len(out), CHUNK):
        part = out[off:off + CHUNK]
        os.write(fd, frame(A_DATA, chan, struct.pack("<B7xQ", 1, off) + part))
    os.write(fd, frame(A_EXIT, chan, struct.pack("<Qii", len(out), 0, 0)))


def main():
    seconds = float(sys.argv[1])
    plan = {op: base64.b64decode(b) for op, b in json.loads(sys.argv[2]).items()}
    fd = take_port()
    os.set_blocking(fd, False)
    # The last line PID 1 forwards: the test starts from it.
    print("taking the port", flush=True)
    time.sleep(0.5)
    stop_pid1()
    answered, buf = [], b""
    end = time.monotonic() + seconds
    while time.monotonic() < end or buf:
        select.select([fd], [], [], 0.2)
        try:
            buf += os.read(fd, 1 << 16)
        except BlockingIOError:
            pass
        while len(buf) >= HDR.size:
            n, typ, _flags, chan = HDR.unpack_from(buf)
            if len(buf) < HDR.size + n:
                break
            payload, buf = buf[HDR.size:HDR.size + n], buf[HDR.size + n:]
            argv = open_argv(payload) if typ == H_OPEN else None
            if argv and argv[0] in plan:
                answer(fd, chan, plan[argv[0]])
                answered.append(argv[0])
        if time.monotonic() > end + 10:
            break  # never end mid-frame, but never hang either
    release_pid1()
    print("answered: " + " ".join(answered), flush=True)


main()
