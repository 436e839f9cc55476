"""The spec in docs/api/openapi.yaml and the shapes this framework checks answers against
(space.SHAPES, written from reference.md) must agree: same required keys, same enums.
Needs no daemon; skipped where PyYAML (python3-yaml) is not installed."""

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
