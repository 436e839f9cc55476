"""Secrets given to spaced in its environment stay in spaced's memory alone.

A daemon started with SPACE_API_KEY, PGPASSWORD and a SPACE_STORE URL in its environment used to
keep them there, and every process it started inherited them: a sandbox's gateway showed both in
/proc/<gw>/environ (in Kubernetes, the database and with it every secret). Now spaced reads them
and wipes them (config.c forget_env, store_take_env_secrets): neither its own /proc/PID/environ
nor any descendant's carries them."""

import os

import space

ENV_KEY = "envkey-" + "7" * 40
PG_PASSWORD = "pgpass-" + "9" * 40


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


def environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except OSError:
        return b""


def test_secrets_in_the_environment_are_not_inherited(monkeypatch):
    monkeypatch.setenv("SPACE_API_KEY", ENV_KEY)
    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
    d = space.Daemon("spaced-env")  # --api-key on its command line wins over SPACE_API_KEY
    try:
        d.start()
        monkeypatch.delenv("SPACE_API_KEY")
        monkeypatch.delenv("PGPASSWORD")
        sb = d.api.new_sandbox("minimal")
        pids = [d.proc.pid] + descendants(d.proc.pid)
        gws = space.gw_pids(sb["id"])
        assert gws, "no gateway for the sandbox"
        for pid in set(pids + gws):
            env = environ(pid)
            assert ENV_KEY.encode() not in env and PG_PASSWORD.encode() not in env, \
                f"pid {pid} ({space.cmdline(pid)[:1]}) carries a secret in its environment"
        assert len(pids) > 2, pids  # the daemon, its gateway and QEMU at least
        d.api.remove_sandbox(sb["id"])
    finally:
        d.cleanup()
