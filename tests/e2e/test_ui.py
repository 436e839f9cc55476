"""The browser page (GET /ui/, docs/guides/browser.md): served without the API key, only plain
file names from the ui dir, with its security headers; and the page driven in Debian's
chromium by tests/e2e/browser/terminal.mjs (playwright-core): log in, create a sandbox, a
terminal (PTY session over the data plane's WebSocket), the files panel, delete.

The daemon here is this module's own, with --ui-dir pointing at a copy of build/ui (`make ui`)
into which the tests plant a symlink and a directory; it runs without ready snapshots (the one
sandbox the browser creates boots cold), so it builds no snapshot VMs beside the shared daemon.
The screenshot of the terminal is kept in build/test-artifacts/ui-terminal.png."""

import os
import shutil
import subprocess

import pytest

import space

BUILD_UI = os.path.join(space.REPO, "build", "ui")
BROWSER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser")
ARTIFACTS = os.path.join(space.REPO, "build", "test-artifacts")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
PAGE_FILES = {
    "index.html": "text/html", "app.js": "text/javascript", "style.css": "text/css",
    "xterm.js": "text/javascript", "xterm.css": "text/css", "addon-fit.js": "text/javascript",
}
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@pytest.fixture(scope="module")
def ui_dir(tmp_path_factory):
    assert os.path.isfile(os.path.join(BUILD_UI, "index.html")), f"{BUILD_UI} is not built (run make ui)"
    d = str(tmp_path_factory.mktemp("ui") / "ui")
    shutil.copytree(BUILD_UI, d)
    os.symlink("/etc/passwd", os.path.join(d, "passwd.js"))  # must never be followed
    os.mkdir(os.path.join(d, "dir.js"))
    return d


@pytest.fixture(scope="module")
def ui_daemon(ui_dir):
    d = space.Daemon("spaced-ui", extra_args=["--ui-dir", ui_dir, "--no-ready-snapshots"])
    try:
        d.start()
        yield d
    finally:
        d.cleanup()


def get(daemon, path, key=None, method="GET"):
    return space.http_request(daemon.url, method, path, None, space.bearer(key) if key else {})


def test_page_is_served_without_the_key(ui_daemon, ui_dir):
    r = get(ui_daemon, "/ui")
    assert r.status == 301 and r.headers.get("Location") == "/ui/", r
    r = get(ui_daemon, "/ui?x=1")
    assert r.status == 301 and r.headers.get("Location") == "/ui/", r
    for path, name in [("/ui/", "index.html")] + [(f"/ui/{n}", n) for n in PAGE_FILES]:
        r = get(ui_daemon, path)
        assert r.status == 200, (path, r)
        with open(os.path.join(ui_dir, name), "rb") as f:
            assert r.body == f.read(), path
        assert r.headers["Content-Type"].startswith(PAGE_FILES[name]), (path, r.headers)
        for k, v in HEADERS.items():
            assert r.headers.get(k) == v, (path, k, r.headers)
        csp = r.headers["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "connect-src 'self' ws: wss:" in csp, csp
        assert "script-src" not in csp, "scripts must come from 'self' only"
    # With a key (the page's own requests never send one, but a client may): the same.
    assert get(ui_daemon, "/ui/app.js", key=ui_daemon.api_key).status == 200


def test_only_plain_names_of_the_ui_dir(ui_daemon):
    for path in ("/ui/passwd.js",        # a symlink (O_NOFOLLOW)
                 "/ui/dir.js",           # not a regular file
                 "/ui/%2e%2e",           # .. after decoding
                 "/ui/.hidden.js",       # leading dot
                 "/ui/nope.js",          # missing
                 "/ui/index.txt",        # a type we do not serve
                 "/ui/a%20b.js",         # outside [A-Za-z0-9._-]
                 "/ui/" + "a" * 200 + ".js"):
        r = get(ui_daemon, path)
        assert r.status == 404, (path, r)
        assert space.check_error(r, path)["code"] == "not_found"
    r = get(ui_daemon, "/ui/..%2fstate")
    assert r.status == 400, r  # an escaped '/' never reaches a handler
    # Everything else still needs the key: deeper paths, other methods, look-alikes.
    for method, path in (("GET", "/ui/a/index.html"), ("POST", "/ui/"), ("PUT", "/ui/app.js"),
                         ("DELETE", "/ui/app.js"), ("GET", "/uix"), ("GET", "/v1/info")):
        r = get(ui_daemon, path, method=method)
        assert r.status == 401, (method, path, r)
    r = get(ui_daemon, "/ui/", key=ui_daemon.api_key, method="POST")
    assert r.status == 405 and r.headers.get("Allow") == "GET", r


def test_missing_ui_dir_says_to_run_make_ui(ui_daemon, ui_dir):
    away = ui_dir + ".away"
    os.rename(ui_dir, away)
    try:
        r = get(ui_daemon, "/ui/")
    finally:
        os.rename(away, ui_dir)
    assert r.status == 404, r
    assert "make ui" in space.check_error(r)["message"], r
    assert get(ui_daemon, "/ui/").status == 200


def browser_node_modules():
    """tests/e2e/browser's playwright-core (make test installs it; a lone pytest run too)."""
    if os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")):
        return
    npm = shutil.which("npm")
    assert npm, "npm is not installed (make test installs it: scripts/npm-deps.txt)"
    p = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=BROWSER_DIR, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, f"npm ci in {BROWSER_DIR} failed:\n{p.stdout}\n{p.stderr}"


def test_browser_terminal_and_files(ui_daemon):
    """The page in chromium against this daemon: see terminal.mjs for the steps."""
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} missing (Debian package chromium: make deps)"
    node = shutil.which("node")
    assert node, "node is not installed (Debian package nodejs: make deps)"
    browser_node_modules()
    os.makedirs(ARTIFACTS, exist_ok=True)
    shot = os.path.join(ARTIFACTS, "ui-terminal.png")
    for stale in (shot, os.path.join(ARTIFACTS, "failure.png")):
        if os.path.exists(stale):
            os.unlink(stale)
    env = dict(os.environ, SPACE_API_KEY=ui_daemon.api_key, CHROMIUM=CHROMIUM)
    timeout_s = int(space.CREATE_TIMEOUT) + 120
    p = subprocess.run([node, "terminal.mjs", "--url", ui_daemon.url, "--artifacts", ARTIFACTS,
                        "--template", "base", "--timeout-s", str(timeout_s)],
                       cwd=BROWSER_DIR, env=env, capture_output=True, text=True,
                       timeout=timeout_s * 2 + 300)
    out = p.stdout + p.stderr
    print(out)
    print(f"screenshot: {shot}")
    assert p.returncode == 0, f"terminal.mjs exited {p.returncode}:\n{out}"
    assert "terminal.mjs: " in out and " passed, 0 failed" in out, out
    assert "# terminal line: hello-42-browser" in out, out
    assert os.path.getsize(shot) > 10000, "the screenshot is empty"
    # The page deleted what it created.
    assert ui_daemon.api.sandboxes() == [], ui_daemon.api.sandboxes()
