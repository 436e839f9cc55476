"""The spec in docs/api/openapi.yaml and the shapes this framework checks answers against
(space.SHAPES, written from reference.md) must agree: same required keys, same enums. And the
spec's paths and methods are exactly the daemon's routes: read from its route tables in the
sources (per plane), and asked of the running daemon (every documented route reaches a
handler). Skipped where PyYAML (python3-yaml) is not installed."""

import os
import re

import pytest

import space

yaml = pytest.importorskip("yaml")

SPEC = os.path.join(space.REPO, "docs", "api", "openapi.yaml")
PAIRS = {
    "Error": space.ERROR, "Info": space.INFO, "Template": space.TEMPLATE,
    "Sandbox": space.SANDBOX, "Operation": space.OPERATION, "Snapshot": space.SNAPSHOT,
    "Session": space.SESSION,
    "DataPlane": space.DATA_PLANE, "ExitEvent": space.SHAPES["exit"],
    "ErrorEvent": space.SHAPES["error_event"],
}


@pytest.fixture(scope="module")
def spec():
    with open(SPEC) as f:
        return yaml.safe_load(f)


def test_spec_is_openapi_3(spec):
    assert spec["openapi"].startswith("3.0")
    assert set(spec["components"]["securitySchemes"]) >= {"apiKey", "sessionToken"}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_schema_required_keys_match_framework(spec, name):
    schema = spec["components"]["schemas"][name]
    assert set(schema["required"]) == set(PAIRS[name]), name
    for key, shape in PAIRS[name].items():
        if isinstance(shape, space.Enum):
            prop = schema["properties"][key]
            if "$ref" in prop:
                prop = spec["components"]["schemas"][prop["$ref"].rsplit("/", 1)[1]]
            assert tuple(prop["enum"]) == shape.values, (name, key)


def test_every_route_of_the_reference_is_in_the_spec(spec):
    with open(os.path.join(space.REPO, "docs", "api", "reference.md")) as f:
        ref = f.read()
    import re
    routes = set()
    for m in re.finditer(r"`(GET|POST|DELETE) (/v1/[^`? ]*)", ref):
        routes.add((m.group(1).lower(), m.group(2)))
    assert len(routes) >= 15, routes
    for method, path in routes:
        norm = re.sub(r"\{[^}]+\}", "{}", path)
        found = [p for p in spec["paths"] if re.sub(r"\{[^}]+\}", "{}", p) == norm]
        assert found, f"{path} missing from openapi.yaml"
        assert method in spec["paths"][found[0]], f"{method.upper()} {path} missing"


# ---- the spec against the daemon's own route tables
# Each listener's table is assembled from the front ends' own tables in src/daemon/listeners.c
# (a `parts[]` list per listener); every table it names is a `const struct http_route NAME[] =
# { ... };` somewhere under src/daemon, each entry `{ EVHTTP_REQ_M, "path", ... }` or a macro
# `X(M, "path", ...)`. A table written some other way, or one the listeners name that this test
# cannot find, fails here instead of being skipped.
DAEMON_SRC = os.path.join(space.REPO, "src", "daemon")
LISTENERS_C = os.path.join(DAEMON_SRC, "listeners.c")
PLANE_OF_FUNCTION = {"control_tables": "control", "listeners_data_tables": "data"}
METHODS = {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"}
# E2B's tables: E2B's protocol, documented in docs/design/e2b.md (test_e2b_routes_are_documented),
# not in openapi.yaml.
E2B_TABLES = {"e2b_api_routes", "envd_routes"}
ENTRY = re.compile(r"^\s*(?:\{\s*EVHTTP_REQ_(\w+)|[A-Z_][A-Z0-9_]*\(\s*(\w+))\s*,\s*\"([^\"]+)\"")


def _norm(path):
    return re.sub(r"\{[^}]*\}", "{}", path)


def listener_tables():
    """{table name: plane} from listeners.c's parts lists."""
    with open(LISTENERS_C) as f:
        text = f.read()
    out = {}
    for fn, plane in PLANE_OF_FUNCTION.items():
        m = re.search(r"\b" + fn + r"\s*\([^)]*\)\s*\{(.*?)\n\}", text, re.S)
        assert m, f"{fn} not in listeners.c"
        parts = re.search(r"parts\[\]\s*=\s*\{(.*?)\};", m.group(1), re.S)
        assert parts, f"{fn}: no parts[] list"
        names = re.findall(r"\{\s*(\w+)\s*,", parts.group(1))
        assert names, f"{fn}: no tables in its parts[]"
        for n in names:
            out[n] = plane
    return out


def table_entries():
    """{table name: [(METHOD, path)]} of every route table under src/daemon."""
    out = {}
    for dirpath, _, files in os.walk(DAEMON_SRC):
        for name in files:
            if not name.endswith(".c"):
                continue
            with open(os.path.join(dirpath, name)) as f:
                text = f.read()
            for m in re.finditer(r"struct\s+http_route\s+(\w+)\s*\[\s*\]\s*=\s*\{(.*?)\n\};", text, re.S):
                lines = [ln for ln in m.group(2).splitlines()
                         if ln.strip() and not ln.strip().startswith(("/*", "*", "//"))]
                entries = []
                for ln in lines:
                    e = ENTRY.match(ln)
                    assert e, f"{m.group(1)} in {name}: an entry this test cannot read: {ln!r}"
                    entries.append(((e.group(1) or e.group(2)).upper(), e.group(3)))
                out[m.group(1)] = entries
    return out


def served_routes(e2b):
    """{(plane, METHOD, normalized path)} the listeners serve: E2B's tables (e2b) or the rest."""
    tables, entries = listener_tables(), table_entries()
    missing = set(tables) - set(entries)
    assert not missing, f"listeners.c names route tables this test cannot find: {missing}"
    return {(plane, method, _norm(path)) for name, plane in tables.items()
            if (name in E2B_TABLES) == e2b for method, path in entries[name]}


def e2b_routes():
    """{(plane, METHOD, path)} of E2B's tables."""
    assert E2B_TABLES <= set(listener_tables()), "E2B's tables are not on the listeners"
    return served_routes(True)


def test_e2b_routes_are_documented():
    """Every E2B route the daemon serves is listed, with its method and plane, in the route
    table of docs/design/e2b.md, and that table lists nothing the daemon does not serve."""
    with open(os.path.join(space.REPO, "docs", "design", "e2b.md")) as f:
        doc = f.read()
    documented = {(plane, method, _norm(path)) for plane, method, path in
                  re.findall(r"^\| (control|data) \| `(GET|POST|PUT|PATCH|DELETE) ([^`]+)`", doc, re.M)}
    served = e2b_routes()
    assert len(served) >= 30, served
    assert served == documented, (sorted(served - documented), sorted(documented - served))


def daemon_routes():
    """{(plane, METHOD, normalized path)} of SPACE's own routes, from the sources."""
    return served_routes(False)


def spec_routes(spec):
    """{(plane, METHOD, normalized path)} from openapi.yaml: a path with its own `servers`
    is served on the planes they name, every other on the control plane."""
    out = set()
    for path, item in spec["paths"].items():
        servers = item.get("servers") or []
        descs = [s.get("description") or "" for s in servers]
        planes = {"data"} if any("data plane" in d for d in descs) else set()
        # A path served on both planes (the files routes) names both servers.
        if not servers or any("control plane" in d for d in descs):
            planes.add("control")
        for key in item:
            if key.upper() in METHODS:
                for plane in planes:
                    out.add((plane, key.upper(), _norm(path)))
    return out


def test_spec_lists_exactly_the_routes_the_daemon_serves(spec):
    served, documented = daemon_routes(), spec_routes(spec)
    assert len(served) >= 30, served
    missing = sorted(served - documented)
    unserved = sorted(documented - served)
    assert not missing, f"served but not in openapi.yaml: {missing}"
    assert not unserved, f"in openapi.yaml but not served: {unserved}"


def test_every_spec_route_reaches_a_handler_of_the_running_daemon(spec, daemon):
    """The same question asked of the binary: each documented (method, path), with made-up
    ids and a body that does not parse, must reach a handler (any answer but the router's
    own 404 `no such route` or 405), on the plane the spec puts it."""
    problems = []
    for plane, method, path in sorted(spec_routes(spec)):
        url = daemon.url if plane == "control" else daemon.data_url
        concrete = path.replace("{}", "nonexistent0")
        headers = space.bearer(daemon.api_key if plane == "control" else "0" * 64)
        body = b"{" if method in ("POST", "PUT", "PATCH") else None
        if body is not None:
            headers["Content-Type"] = "application/json"
        r = space.http_request(url, method, concrete, body, headers)
        msg = ""
        if r.status in (404, 405):
            msg = space.check_error(r, f"{method} {concrete}")["message"]
        if r.status == 405 or msg.startswith("no such route"):
            problems.append(f"{plane} {method} {path}: {r.status} {msg}")
    assert not problems, problems
    # And the control plane does not answer a data-plane path, nor the reverse.
    r = space.http_request(daemon.url, "POST", "/v1/sessions/nonexistent0/attach", None,
                           space.bearer(daemon.api_key))
    assert r.status == 404 and space.check_error(r)["message"].startswith("no such route"), r
