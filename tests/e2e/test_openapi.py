"""The spec in docs/api/openapi.yaml and the shapes this framework checks answers against
(space.SHAPES, written from reference.md) must agree: same required keys, same enums. And the
spec's paths and methods are exactly the daemon's routes: read from its route tables in the
sources (per plane), and asked of the running daemon (every documented route reaches a
handler). Skipped where PyYAML (python3-yaml) is not installed."""

import os

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
# Every `static const struct http_route NAME[] = { ... };` in the daemon's sources, with the
# plane its folder serves; and every `.routes = NAME` an http_plane uses must be one of them,
# so a route table written some other way fails here instead of being skipped.
DAEMON_SRC = os.path.join(space.REPO, "src", "daemon")
PLANE_OF_FOLDER = {"api": "control", "dataplane": "data"}
METHODS = {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"}


# The E2B front end's route lists (src/daemon/e2b/e2b.h), by the plane whose table names them.
E2B_MACROS = {"E2B_API_ROUTES": "control", "ENVD_ROUTES": "data"}
E2B_H = os.path.join(DAEMON_SRC, "e2b", "e2b.h")


def e2b_routes():
    """{(plane, METHOD, path)} from the E2B macros of e2b.h."""
    import re
    with open(E2B_H) as f:
        text = f.read()
    out = set()
    for macro, plane in E2B_MACROS.items():
        m = re.search(r"#define\s+" + macro + r"\b(.*?)(?<!\\)\n", text, re.S)
        assert m, f"{macro} not in e2b.h"
        for method, path in re.findall(r"EVHTTP_REQ_(\w+)\s*,\s*\"([^\"]+)\"", m.group(1)):
            out.add((plane, method, path))
    return out


def test_e2b_routes_are_documented():
    """Every E2B route the daemon serves is listed, with its method and plane, in the route
    table of docs/design/e2b.md, and that table lists nothing the daemon does not serve."""
    import re
    with open(os.path.join(space.REPO, "docs", "design", "e2b.md")) as f:
        doc = f.read()
    documented = {(plane, method, _norm(path)) for plane, method, path in
                  re.findall(r"^\| (control|data) \| `(GET|POST|PUT|DELETE) ([^`]+)`", doc, re.M)}
    served = e2b_routes()
    assert len(served) >= 30, served
    assert served == documented, (sorted(served - documented), sorted(documented - served))


def _norm(path):
    import re
    return re.sub(r"\{[^}]*\}", "{}", path)


def daemon_routes():
    """{(plane, METHOD, normalized path)} from the sources."""
    import re
    tables, used, routes = set(), set(), set()
    for dirpath, _, files in os.walk(DAEMON_SRC):
        for name in files:
            if not name.endswith(".c"):
                continue
            with open(os.path.join(dirpath, name)) as f:
                text = f.read()
            # A plane's table by name; an api process's tables (cluster_api_routes(api_routes,
            # ...)) are made from these at start, the same routes relayed: not tables of their own.
            used.update(m.group(1) for m in re.finditer(r"\.routes\s*=\s*(\w+)\s*[,;]", text))
            for m in re.finditer(r"struct\s+http_route\s+(\w+)\s*\[\s*\]\s*=\s*\{(.*?)\n\};", text, re.S):
                if "stream" in m.group(1):
                    continue  # which routes stream their bodies: a subset, not a plane's table
                folder = os.path.relpath(dirpath, DAEMON_SRC).split(os.sep)[0]
                assert folder in PLANE_OF_FOLDER, f"route table {m.group(1)} in {dirpath}: which plane?"
                tables.add(m.group(1))
                body = m.group(2)
                entries = re.findall(r"\{\s*EVHTTP_REQ_(\w+)\s*,\s*\"([^\"]+)\"\s*,\s*\w+\s*\}", body)
                # Every brace-entry of the table parsed: none written in a shape we skip. The E2B
                # front end's routes (one macro per plane) are E2B's protocol, documented in
                # docs/design/e2b.md and checked by test_e2b_routes_are_documented.
                lines = [ln for ln in body.splitlines() if ln.strip() and not ln.strip().startswith(("/*", "*", "//"))
                         and ln.strip().rstrip(",") not in E2B_MACROS]
                assert len(entries) == len(lines), f"{m.group(1)}: unparsed entries in\n{body}"
                for method, path in entries:
                    routes.add((PLANE_OF_FOLDER[folder], method, _norm(path)))
    assert used and used <= tables, f"planes use route tables {used - tables} this test cannot read"
    return routes


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
