"""Clients that have not authenticated cannot make the daemon hold their request bodies.

Credentials are checked from a request's head before a byte of its body is read
(src/daemon/http/preauth.c): no key, a wrong key or a token known to be wrong is answered 401 and
the body never read; a token the daemon cannot decide from memory (one it has never seen) has
its body read only within a budget per daemon and per client address (429 over it). Measured on
the plain daemon (under ASan freed memory sits in the allocator's quarantine, so RSS would
count every byte ever freed): 60 connections each sending a body one byte short of the data
plane's 4 MiB limit must leave spaced's RSS within 64 MiB of where it started."""

import os
import select
import socket
import time

import pytest

import space

N = 60
DATA_BODY = (4 << 20) - 1
API_BODY = (1 << 20) - 1


@pytest.fixture(scope="module")
def plain():
    d = space.Daemon("spaced-preauth")
    d.binary = space.PLAIN_SPACED
    try:
        d.start()
        yield d
    finally:
        d.cleanup()


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def flood(daemon, url, head, body_len, n=N, settle=3.0):
    """n connections, each sending head and then as much of a body_len body as the daemon takes,
    all at once. Returns (peak RSS growth in KiB, the first bytes each connection got back)."""
    host, port = space.split_url(url)
    pid = daemon.proc.pid
    before = rss_kib(pid)
    body = memoryview(b"x" * body_len)
    socks, sent, answers = [], [], []
    for _ in range(n):
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(head)
        s.setblocking(False)
        socks.append(s)
        sent.append(0)
        answers.append(b"")
    peak, last_progress = before, time.monotonic()
    live = set(range(n))
    while live and time.monotonic() - last_progress < settle:
        _, writable, _ = select.select([], [socks[i] for i in live], [], 0.2)
        for s in writable:
            i = socks.index(s)
            try:
                k = s.send(body[sent[i]:sent[i] + (256 << 10)])
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:  # the daemon answered and closed
                live.discard(i)
                continue
            sent[i] += k
            last_progress = time.monotonic()
            if sent[i] >= body_len:
                live.discard(i)
        peak = max(peak, rss_kib(pid))
    for _ in range(10):
        peak = max(peak, rss_kib(pid))
        time.sleep(0.1)
    for i, s in enumerate(socks):
        s.setblocking(True)
        s.settimeout(5)
        try:
            answers[i] = s.recv(4096)
        except OSError:
            answers[i] = b"(reset)"
        s.close()
    print(f"# RSS {before} KiB before, peak {peak} KiB; sent {sum(sent) >> 20} MiB; "
          f"answers {sorted(set(a[:12] for a in answers))}")
    return peak - before, answers


def status_of(answer):
    return answer[9:12].decode(errors="replace") if answer.startswith(b"HTTP/1.1 ") else answer[:16]


def never_read(daemon, url, head, body_len, bound_kib):
    """Flooded with head + a body_len body on N connections: RSS within bound_kib, every answer
    a 401 (or the close after it)."""
    grew, answers = flood(daemon, url, head, body_len)
    assert grew < bound_kib, f"spaced's RSS grew {grew} KiB for bodies it should never have read"
    statuses = {status_of(a) for a in answers}
    assert statuses <= {"401", b"(reset)", b""} and "401" in statuses, statuses


def test_bodies_with_a_wrong_api_key_are_never_read(plain):
    never_read(plain, plain.url, (f"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {'0' * 32}\r\n"
                                  f"Content-Type: application/json\r\nContent-Length: {API_BODY}\r\n\r\n").encode(),
               API_BODY, 16 * 1024)


def test_bodies_without_credentials_are_never_read(plain):
    never_read(plain, plain.data_url, (f"POST /v1/sessions/ss-0000000000000000/stdin HTTP/1.1\r\nHost: x\r\n"
                                       f"Content-Length: {DATA_BODY}\r\n\r\n").encode(), DATA_BODY, 64 * 1024)


def test_bodies_with_unknown_tokens_stay_within_the_budget(plain):
    """A token never seen is looked up in the store after its body: those bodies are read only
    within the budget (16 MiB per client address by default); the rest are told to retry."""
    head = (f"POST /v1/sessions/ss-0000000000000000/stdin HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {'ab' * 32}\r\nContent-Length: {DATA_BODY}\r\n\r\n").encode()
    grew, answers = flood(plain, plain.data_url, head, DATA_BODY)
    assert grew < 64 * 1024, f"spaced's RSS grew {grew} KiB"
    statuses = [status_of(a) for a in answers]
    assert "429" in statuses, statuses
    assert set(statuses) <= {"404", "429", b"(reset)", b""}, statuses
    assert statuses.count("404") <= 4, statuses  # 16 MiB of 4 MiB bodies at a time
    assert "at_capacity" in b"".join(answers).decode(errors="replace")
    # alone, such a request is answered as before (its session does not exist)
    resp = space.http_request(plain.data_url, "POST", "/v1/sessions/ss-0000000000000000/stdin", b"hi",
                              {"Authorization": f"Bearer {'ab' * 32}"})
    assert resp.status == 404, resp


def test_memory_is_given_back_after_a_burst(plain):
    """After the bursts above the daemon's RSS comes back near where it was."""
    pid = plain.proc.pid
    start = rss_kib(pid)
    head = (f"POST /v1/sessions/ss-0000000000000000/stdin HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {'cd' * 32}\r\nContent-Length: {DATA_BODY}\r\n\r\n").encode()
    for _ in range(3):
        flood(plain, plain.data_url, head, DATA_BODY, n=8, settle=1.5)
    time.sleep(2.5)  # the once-a-second tick trims what the allocator keeps
    after = rss_kib(pid)
    print(f"# RSS {start} KiB before three bursts, {after} KiB after")
    assert after - start < 24 * 1024, (start, after)


def test_authenticated_bodies_are_read_as_always(plain):
    api = plain.api
    sb = api.new_sandbox("minimal")
    try:
        s = api.create_session(sb["id"], ["sh", "-c", "wc -c"], stdin=True)
        job = s.start(timeout=120)
        data = os.urandom(DATA_BODY)
        resp = s.dp("POST", "/stdin?close=1", data)
        assert resp.status == 204, resp
        r = job.wait()
        assert r.exit_code == 0 and bytes(r.stdout).strip() == str(DATA_BODY).encode(), r
        # a wrong token on a session this process holds: 401 before the body
        bad = space.http_request(s.url, "POST", f"/v1/sessions/{s.id}/stdin", b"x" * 1000,
                                 {"Authorization": "Bearer " + "00" * 32})
        assert bad.status == 401, bad
    finally:
        api.remove_sandbox(sb["id"])
