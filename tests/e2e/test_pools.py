"""Clone starts, warm pools and capacity: creates clone the template's ready snapshot; a pool
hands out ready VMs and is refilled; concurrent creates never share a VM; the control plane
answers while VMs start; a node that is full says so with 429."""

import subprocess
import sys
import threading
import time

import space

# GET /v1/info every 20 ms until terminated; prints each latency (seconds) as it goes.
PROBE = """
import http.client, signal, sys, time
host, port = sys.argv[1].split("//")[1].split(":")
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
while True:
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    t0 = time.monotonic()
    c.request("GET", "/v1/info", headers={"Authorization": "Bearer " + sys.argv[2]})
    c.getresponse().read()
    print(time.monotonic() - t0, flush=True)
    c.close()
    time.sleep(0.02)
"""


def test_creates_clone_the_ready_snapshot(api):
    t = api.wait_ready_snapshot("minimal")
    rec = api.new_sandbox("minimal")
    try:
        assert rec["start_kind"] == "clone", rec
        snap = api.snapshot(t["ready_snapshot"])
        assert snap["kind"] == "ready" and snap["template_digest"] == t["digest"], snap
        # Another size than the template's boots instead.
        other = api.new_sandbox("minimal", memory_mib=t["memory_mib"] + 64)
        assert other["start_kind"] == "boot", other
        api.remove_sandbox(other["id"])
    finally:
        api.remove_sandbox(rec["id"])


def test_burst_of_ten_against_a_pool_of_four(own_daemon):
    api = own_daemon.api
    api.wait_ready_snapshot("minimal")
    t = api.set_pool("minimal", 4)
    assert t["pool"]["size"] == 4
    deadline = time.monotonic() + 120
    while api.template("minimal")["pool"]["ready"] < 4:
        assert time.monotonic() < deadline, api.template("minimal")["pool"]
        time.sleep(0.3)

    results, errors = [], []

    def create():
        try:
            sb, op = api.create_sandbox("minimal")
            results.append((sb["id"], op["id"]))
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    # While they start, the control plane keeps answering: the loop never blocks. The probe is
    # a process of its own, so that what it measures is the daemon, not this one's threads.
    prober = subprocess.Popen([sys.executable, "-c", PROBE, own_daemon.url, own_daemon.api_key],
                              stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    threads = [threading.Thread(target=create) for _ in range(10)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    ops = [api.wait_op(op) for _, op in results]
    prober.terminate()
    latencies = [float(x) for x in prober.communicate(timeout=10)[0].split()]
    assert not errors, errors
    ids = [sb for sb, _ in results]
    assert len(ids) == 10 and len(set(ids)) == 10, ids
    assert all(o["state"] == "succeeded" for o in ops), ops
    kinds = [api.sandbox(i)["start_kind"] for i in ids]
    assert kinds.count("pool") >= 4 and set(kinds) <= {"pool", "clone"}, kinds
    hosts = {bytes(api.run(i, ["hostname"]).stdout).strip() for i in ids}
    assert len(hosts) == 10, f"two creates got the same VM: {hosts}"
    worst, typical = max(latencies), sorted(latencies)[len(latencies) // 2]
    print(f"# GET /v1/info during 10 creates: {len(latencies)} calls, median {typical * 1000:.1f} ms, "
          f"max {worst * 1000:.1f} ms")
    # Typically within 50 ms: a loop that waited on children or gateways shows in the median.
    # The worst single call is bounded loosely: with ten TCG VMs booting on 2 cores the probe
    # process itself waits for a CPU (strace of spaced during this burst: no syscall or gap
    # over 65 ms in its loop, while the probe saw 300-600 ms), so a tight bound on the max
    # measured the scheduler, not the daemon. A wait on a child per VM (gateways were stopped
    # synchronously, 60-90 ms each) is what the median and this bound still catch.
    assert typical < 0.05, f"GET /v1/info took {typical * 1000:.0f} ms (median) while VMs started"
    assert worst < 1.0, f"the control plane stalled {worst * 1000:.0f} ms while VMs started"
    # Pool VMs are not the clients': not listed, not found.
    listed = {s["id"] for s in api.sandboxes()}
    assert set(ids) <= listed
    api.set_pool("minimal", 0)
    for i in ids:
        api.remove_sandbox(i)


def test_a_full_node_answers_429(own_daemon_small):
    api = own_daemon_small.api
    t = api.template("minimal")
    mem = t["memory_mib"]
    first = api.new_sandbox("minimal")
    err = api.expect_error("POST", "/v1/sandboxes", 429, {"template": "minimal"})
    assert "memory" in err["message"] or "capacity" in err["message"], err
    err = api.expect_error("POST", f"/v1/sandboxes/{first['id']}/fork", 429, {"count": 1})
    assert err["code"] == "at_capacity"
    info = api.info()["capacity"]
    assert info["memory_used_mib"] >= mem and info["memory_budget_mib"] < 2 * (mem + 48), info
    # Room again after a suspend: suspended sandboxes cost disk only.
    api.do(first["id"], "suspend")
    second = api.new_sandbox("minimal")
    err = api.expect_error("POST", f"/v1/sandboxes/{first['id']}/restore", 429, {})
    assert err["code"] == "at_capacity"
    assert api.sandbox(first["id"])["state"] == "suspended", "a refused restore leaves it suspended"
    api.remove_sandbox(second["id"])
    api.do(first["id"], "restore")
    api.remove_sandbox(first["id"])
