"""conftest.py -- fixtures for the end-to-end tests: a real spaced, shared sandboxes, log dumps."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import space  # noqa: E402


def remove_unless_deleted(api, sb_id):
    """Teardown of a shared sandbox: it must delete cleanly (an error fails the test that
    owns the fixture), unless a test already deleted it."""
    if api.sandbox(sb_id)["state"] != "deleted":
        api.remove_sandbox(sb_id)


@pytest.fixture(scope="session")
def daemon():
    """One daemon for every test that does not need its own (restarts, QEMU kills)."""
    d = space.Daemon("spaced")
    try:
        d.start()
        yield d
    finally:
        d.cleanup()


@pytest.fixture(scope="module")
def own_daemon():
    """A daemon for this module alone, for tests that restart it, break its VMs or count every
    sandbox it has. Restart it on the same state dir with own_daemon.restart(signal)."""
    d = space.Daemon("spaced-own")
    try:
        d.start()
        yield d
    finally:
        d.cleanup()


@pytest.fixture(scope="module")
def own_daemon_small():
    """A daemon with room for one minimal VM (its memory budget), booting without ready
    snapshots: for capacity tests."""
    d = space.Daemon("spaced-small", extra_args=["--memory-budget", "250", "--no-ready-snapshots"])
    try:
        d.start()
        yield d
    finally:
        d.cleanup()


@pytest.fixture(scope="session")
def api(daemon):
    return daemon.api


@pytest.fixture(scope="module")
def sb(api):
    """A running `minimal` sandbox shared by the tests of a module that do not need a fresh
    one; created with a sandbox-level env the tests can look for."""
    rec = api.new_sandbox("minimal", env={"SB_LEVEL": "from-sandbox"},
                          metadata={"fixture": "minimal"}, timeout_s=3600)
    yield rec
    remove_unless_deleted(api, rec["id"])


@pytest.fixture(scope="module")
def base_sb(api):
    """A running `base` sandbox (Debian userland, default user `user`)."""
    rec = api.new_sandbox("base", metadata={"fixture": "base"}, timeout_s=3600)
    yield rec
    remove_unless_deleted(api, rec["id"])


@pytest.fixture(autouse=True)
def no_sanitizer_report():
    """After each test: a sanitizer report from any running daemon fails this test (at its
    teardown), with the report; the daemon's own teardown catches those written at exit."""
    yield
    reports = {}
    for d in list(space.Daemon.running):
        reports.update(d.new_sanitizer_reports())
    if reports:
        pytest.fail("sanitizer report(s) during this test:\n" + "\n".join(
            f"---- {path}\n{text[:20000]}" for path, text in reports.items()), pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failure, attach the tail of every running daemon's log to the report."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for d in list(space.Daemon.running):
            rep.sections.append((f"{d.name} log tail ({d.log_path})", d.log_tail(80)))
