"""deploy/kubernetes rendered and checked offline: every kustomization renders with Debian's
kubectl (build/tools, `make k8s-tools`), every object validates against the Kubernetes schemas
(tests/k8s/validate.mjs, kubernetes-models from `make k8s-test-deps`), and the objects say what a
SPACE cluster needs: spaced's flags as spaced parses them, probes on /v1/healthz and /v1/readyz,
a privileged node DaemonSet with /dev/kvm and /dev/net/tun, two api replicas or more, the store
URL from a Secret only, resource requests everywhere, and no reference left dangling.

Secrets the operator would provide are written into a copy of deploy/kubernetes; nothing here
needs the network or a cluster (docs/guides/kubernetes.md)."""

import base64
import os
import re
import shutil
import subprocess

import pytest
import yaml

import space

DEPLOY = os.path.join(space.REPO, "deploy", "kubernetes")
KUBECTL = os.path.join(space.REPO, "build", "tools", "usr", "bin", "kubectl")
VALIDATOR = os.path.join(space.REPO, "tests", "k8s", "validate.mjs")
SPACED = os.path.join(space.REPO, "build", "bin", "spaced")
# Every kustomization under deploy/kubernetes; test_every_kustomization_is_listed keeps this whole.
KUSTOMIZATIONS = ("base", "postgres", "external-postgres", "overlays/dev", "overlays/production")
# What an operator applies: the rest are parts, not a whole deployment.
DEPLOYABLE = ("overlays/dev", "overlays/production")
# The files the kustomizations read that operators write (gitignored), with stand-in content.
SECRET_FILES = {
    "overlays/dev/secrets/api-key": "sk-k8s-test-dev\n",
    "overlays/production/secrets/api-key": "sk-k8s-test-production\n",
    "postgres/secrets/password": "k8s-test-password\n",
    "postgres/secrets/ca.crt": "k8s-test postgres ca\n",
    "postgres/secrets/tls.crt": "k8s-test postgres certificate\n",
    "postgres/secrets/tls.key": "k8s-test postgres key\n",
    "external-postgres/secrets/url": "postgres://space:k8s-test@db.example.com:5432/space?sslmode=verify-full\n",
}
for _ov in ("dev", "production"):
    SECRET_FILES.update({f"overlays/{_ov}/secrets/cluster-key": f"k8s-test-cluster-key-{_ov}\n",
                         f"overlays/{_ov}/secrets/cluster-ca.crt": "k8s-test cluster ca\n",
                         f"overlays/{_ov}/secrets/node.crt": "k8s-test node certificate\n",
                         f"overlays/{_ov}/secrets/node.key": "k8s-test node key\n"})
WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet")


def need(path, how):
    if not os.path.exists(path):
        pytest.fail(f"{path} missing: run {how}", pytrace=False)


def node_bin():
    node = shutil.which("node")
    if not node:
        pytest.fail("node is not on PATH (Debian's nodejs: make deps)", pytrace=False)
    return node


def validate(path):
    return subprocess.run([node_bin(), VALIDATOR, path], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A copy of deploy/kubernetes with the operator's secret files in place."""
    need(KUBECTL, "make k8s-tools")
    need(os.path.join(space.REPO, "tests", "k8s", "node_modules", "kubernetes-models"), "make k8s-test-deps")
    root = tmp_path_factory.mktemp("k8s") / "kubernetes"
    shutil.copytree(DEPLOY, root, ignore=lambda d, names: [n for n in names if os.path.basename(d) == "secrets"
                                                            and n != "README.md"])
    for rel, text in SECRET_FILES.items():
        (root / rel).write_text(text)
    return root


@pytest.fixture(scope="module")
def rendered(tree):
    """{kustomization: (path of the rendered YAML, [objects])}"""
    out = {}
    for k in KUSTOMIZATIONS:
        r = subprocess.run([KUBECTL, "kustomize", str(tree / k)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"kubectl kustomize {k}: {r.stderr}"
        path = tree / (k.replace("/", "_") + ".rendered.yaml")
        path.write_text(r.stdout)
        out[k] = (str(path), [o for o in yaml.safe_load_all(r.stdout) if o])
    return out


def objects(rendered, k, kind=None):
    return [o for o in rendered[k][1] if kind is None or o["kind"] == kind]


def one(rendered, k, kind, name):
    found = [o for o in objects(rendered, k, kind) if o["metadata"]["name"] == name]
    assert len(found) == 1, f"{k}: {len(found)} {kind} named {name}"
    return found[0]


def pod_specs(rendered, k):
    for o in objects(rendered, k):
        if o["kind"] in WORKLOADS:
            yield o, o["spec"]["template"]["spec"]


def containers(spec):
    return spec.get("initContainers", []) + spec["containers"]


def spaced_containers(rendered, k):
    for o, spec in pod_specs(rendered, k):
        for c in containers(spec):
            if c.get("command") and os.path.basename(c["command"][0]) == "spaced":
                yield o, spec, c


def api(rendered, k):
    return one(rendered, k, "Deployment", "space-api")


def node_ds(rendered, k):
    return one(rendered, k, "DaemonSet", "space-node")


def the_container(workload, name):
    found = [c for c in workload["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    assert len(found) == 1, f"{workload['metadata']['name']}: no container {name}"
    return found[0]


def flag_value(container, flag):
    for a in container.get("args", []):
        if a.startswith(flag + "="):
            return a[len(flag) + 1:]
    args = container.get("args", [])
    if flag in args:
        return args[args.index(flag) + 1]
    return None


def env_of(container, name):
    found = [e for e in container.get("env", []) if e["name"] == name]
    return found[0] if found else None


def test_every_kustomization_is_listed():
    found = sorted(os.path.relpath(dirpath, DEPLOY) for dirpath, _, files in os.walk(DEPLOY)
                   if "kustomization.yaml" in files)
    assert found == sorted(KUSTOMIZATIONS)


@pytest.mark.parametrize("k", KUSTOMIZATIONS)
def test_renders_and_validates(rendered, k):
    path, objs = rendered[k]
    assert objs, f"{k} rendered nothing"
    r = validate(path)
    assert r.returncode == 0, f"{k}:\n{r.stdout}{r.stderr}"
    assert r.stdout.strip() == f"ok: {len(objs)} objects"


def test_validator_rejects_a_broken_object(tmp_path):
    """The check can fail: a Deployment with replicas "two" is refused with its error, and so are
    an unknown kind and a name the API server would refuse; the same object made right passes."""
    need(os.path.join(space.REPO, "tests", "k8s", "node_modules", "kubernetes-models"), "make k8s-test-deps")
    good = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "space-api"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}},
                                  "spec": {"containers": [{"name": "api", "image": "spaced"}]}}}}
    ok = tmp_path / "ok.yaml"
    ok.write_text(yaml.safe_dump(good))
    r = validate(str(ok))
    assert r.returncode == 0, r.stderr
    cases = {
        "replicas": (dict(good, spec=dict(good["spec"], replicas="two")), "replicas must be integer"),
        "kind": (dict(good, kind="Deploymnt"), 'no kind "Deploymnt"'),
        "name": (dict(good, metadata={"name": "Space_API"}), "RFC 1123"),
        "ports": (dict(good, spec=dict(good["spec"], template={"metadata": {"labels": {"a": "b"}}, "spec": {
            "containers": [{"name": "api", "image": "spaced", "ports": [{"containerPort": "7070"}]}]}})),
            "containerPort must be integer"),
    }
    for what, (obj, message) in cases.items():
        bad = tmp_path / f"{what}.yaml"
        # A valid object first: the failure must name the broken one among good ones.
        bad.write_text(yaml.safe_dump(good) + "---\n" + yaml.safe_dump(obj))
        r = validate(str(bad))
        assert r.returncode == 1, f"{what}: accepted:\n{r.stdout}{r.stderr}"
        assert message in r.stderr and "document 2" in r.stderr and "failed: 1 of 2 objects" in r.stderr, r.stderr


def spaced_help():
    need(SPACED, "make bins")
    r = subprocess.run([SPACED, "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_spaced_flags_are_spaceds(rendered):
    """Every flag and SPACE_* variable the manifests give spaced is one `spaced --help` lists."""
    text = spaced_help()
    flags = set(re.findall(r"(--[a-z][a-z-]*)", text))
    names = set(re.findall(r"\b(SPACE_[A-Z_]+)\b", text))
    seen = 0
    for k in KUSTOMIZATIONS:
        for o, _, c in spaced_containers(rendered, k):
            seen += 1
            for a in c["command"][1:] + c.get("args", []):
                if a.startswith("--"):
                    assert a.split("=", 1)[0] in flags, f"{k}: {o['metadata']['name']}/{c['name']}: {a}"
            for e in c.get("env", []):
                if e["name"].startswith("SPACE_"):
                    assert e["name"] in names, f"{k}: {o['metadata']['name']}/{c['name']}: env {e['name']}"
    assert seen >= 2 * len(DEPLOYABLE)


def substitute(container, values):
    """args with Kubernetes' $(VAR) references replaced; every reference must name an env var."""
    known = {e["name"] for e in container.get("env", [])}

    def sub(m):
        assert m.group(1) in known, f"{container['name']}: $({m.group(1)}) is not in its env"
        return values.get(m.group(1), "x")
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, a) for a in container.get("args", [])]


@pytest.mark.parametrize("k", DEPLOYABLE)
def test_spaced_parses_the_arguments(rendered, k):
    """spaced itself reads each container's command line (values included) and its SPACE_*
    environment: `--help` last, so it exits 0 only if everything before it parsed."""
    need(SPACED, "make bins")
    values = {"POD_IP": "10.1.2.3", "DATA_URL": "http://space-api.space.svc:7071"}
    for o, _, c in spaced_containers(rendered, k):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        for e in c.get("env", []):
            if not e["name"].startswith("SPACE_"):
                continue
            src = e.get("valueFrom", {})
            if "fieldRef" in src:
                env[e["name"]] = "worker-1.example" if src["fieldRef"]["fieldPath"] == "spec.nodeName" else "x"
            elif "secretKeyRef" in src and src["secretKeyRef"]["key"] == "url":
                env[e["name"]] = "postgres://space@space-postgres:5432/space"
            else:
                env[e["name"]] = e.get("value", "sk-test")
        argv = [SPACED] + substitute(c, values) + ["--help"]
        r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
        assert r.returncode == 0 and "usage: spaced" in r.stdout, f"{k}: {argv}: {r.stderr}"


@pytest.mark.parametrize("k", DEPLOYABLE)
def test_probes_on_the_control_port(rendered, k):
    for w in (api(rendered, k), node_ds(rendered, k)):
        c = the_container(w, w["metadata"]["name"].split("-", 1)[1])
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports == {"control": 7070, "data": 7071}
        assert flag_value(c, "--listen").endswith(":7070") and flag_value(c, "--data-listen").endswith(":7071")
        for probe, path in (("livenessProbe", "/v1/healthz"), ("readinessProbe", "/v1/readyz"),
                            ("startupProbe", "/v1/healthz")):
            if probe == "startupProbe" and probe not in c:
                continue
            get = c[probe]["httpGet"]
            port = ports.get(get["port"], get["port"])
            assert (get["path"], port) == (path, 7070), f"{w['metadata']['name']}: {probe}"
            assert "httpHeaders" not in get  # health endpoints need no API key


@pytest.mark.parametrize("k", DEPLOYABLE)
def test_node_daemonset(rendered, k):
    ds = node_ds(rendered, k)
    spec = ds["spec"]["template"]["spec"]
    c = the_container(ds, "node")
    assert flag_value(c, "--role") == "node"
    assert c["securityContext"]["privileged"] is True
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in c["volumeMounts"]}
    for dev in ("/dev/kvm", "/dev/net/tun"):
        assert mounts[dev]["hostPath"] == {"path": dev, "type": "CharDevice"}
    assert mounts["/dev/shm"]["emptyDir"]["medium"] == "Memory"
    assert mounts[flag_value(c, "--state-dir")]["hostPath"]["path"] == "/var/lib/space"
    claim = mounts[flag_value(c, "--shared-dir")]["persistentVolumeClaim"]["claimName"]
    assert one(rendered, k, "PersistentVolumeClaim", claim)["spec"]["accessModes"] == ["ReadWriteMany"]
    assert spec["nodeSelector"]["space.dev/kvm"] == "true"
    assert not spec.get("hostNetwork")
    # The api reaches the node at its own pod address, over TLS; its name is the Kubernetes node's.
    assert flag_value(c, "--advertise-url") == "https://$(POD_IP):7070"
    assert flag_value(c, "--advertise-data-url") == "https://$(POD_IP):7071"
    tls = mounts[os.path.dirname(flag_value(c, "--tls-cert"))]["secret"]
    assert tls["secretName"].startswith("space-cluster-tls") and tls["defaultMode"] == 0o400
    assert os.path.dirname(flag_value(c, "--tls-key")) == os.path.dirname(flag_value(c, "--tls-cert"))
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert c[probe]["httpGet"]["scheme"] == "HTTPS", probe
    # the cluster's credential, root-only like the key
    ck = mounts[os.path.dirname(flag_value(c, "--cluster-key-file"))]["secret"]
    assert ck["secretName"].startswith("space-cluster") and ck["defaultMode"] == 0o400
    assert env_of(c, "POD_IP")["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env_of(c, "SPACE_NODE_ID")["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    # Sandboxes' egress is pod traffic: every gateway refuses the cluster's own ranges.
    assert flag_value(c, "--egress-refuse") == "10.244.0.0/16,10.96.0.0/12"
    # The key from a root-only file of the Secret (spaced refuses one others may read).
    key = mounts[os.path.dirname(flag_value(c, "--api-key-file"))]["secret"]
    assert key["defaultMode"] == 0o400


@pytest.mark.parametrize("k", DEPLOYABLE)
def test_api_deployment(rendered, k):
    d = api(rendered, k)
    assert d["spec"]["replicas"] >= 2
    c = the_container(d, "api")
    assert flag_value(c, "--role") == "api"
    pod_sc = d["spec"]["template"]["spec"]["securityContext"]
    assert pod_sc["runAsNonRoot"] is True and pod_sc["runAsUser"] != 0
    assert not c["securityContext"].get("privileged")
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    # it verifies the nodes (the cluster CA, the name their certificate carries) and presents
    # the cluster's credential to them
    assert flag_value(c, "--cluster-tls-name") == "space-node"
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in d["spec"]["template"]["spec"]["volumes"]}
    ca = vols[mounts[os.path.dirname(flag_value(c, "--cluster-ca"))]]["secret"]
    assert ca["items"] == [{"key": "ca.crt", "path": "ca.crt"}], ca  # the CA only, not the key
    assert env_of(c, "SPACE_CLUSTER_KEY")["valueFrom"]["secretKeyRef"]["key"] == "cluster-key"
    svc = one(rendered, k, "Service", "space-api")
    assert svc["spec"]["selector"].items() <= d["spec"]["template"]["metadata"]["labels"].items()
    assert {p["port"] for p in svc["spec"]["ports"]} == {7070, 7071}
    # Clients stream through the api: the data-plane URL every spaced hands out is the Service's
    # (dev: the same Service through kubectl port-forward).
    for _, _, sc in spaced_containers(rendered, k):
        assert flag_value(sc, "--data-url") == "$(DATA_URL)"
    url = [o for o in objects(rendered, "base", "ConfigMap") if o["metadata"]["name"].startswith("space-config")]
    assert url[0]["data"]["data-url"] == "http://space-api.space.svc:7071"


@pytest.mark.parametrize("k", KUSTOMIZATIONS)
def test_store_url_only_from_a_secret(rendered, k):
    for o, spec in pod_specs(rendered, k):
        for c in containers(spec):
            for text in c.get("command", []) + c.get("args", []) + [e.get("value", "") for e in c.get("env", [])]:
                assert "postgres://" not in text and "postgresql://" not in text, f"{k}: {c['name']}: {text}"
            assert flag_value(c, "--store") is None, f"{k}: {c['name']}: --store inline"
    for o, _, c in spaced_containers(rendered, k):
        assert env_of(c, "SPACE_STORE")["valueFrom"]["secretKeyRef"]["key"] == "url"
    for cm in objects(rendered, k, "ConfigMap"):
        assert "postgres://" not in yaml.safe_dump(cm), f"{k}: {cm['metadata']['name']}"


@pytest.mark.parametrize("k", KUSTOMIZATIONS)
def test_resource_requests_everywhere(rendered, k):
    for o, spec in pod_specs(rendered, k):
        for c in containers(spec):
            req = c.get("resources", {}).get("requests", {})
            assert req.get("cpu") and req.get("memory"), f"{k}: {o['metadata']['name']}/{c['name']}"


def refs(spec):
    """(kind, name, key or None, optional) of every Secret, ConfigMap and claim a pod uses."""
    for c in containers(spec):
        for e in c.get("env", []):
            for kind, field in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
                r = e.get("valueFrom", {}).get(field)
                if r:
                    yield kind, r["name"], r["key"], r.get("optional", False)
    for v in spec.get("volumes", []):
        if "secret" in v:
            yield "Secret", v["secret"]["secretName"], None, v["secret"].get("optional", False)
        if "configMap" in v:
            yield "ConfigMap", v["configMap"]["name"], None, v["configMap"].get("optional", False)
        if "persistentVolumeClaim" in v:
            yield "PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"], None, False


@pytest.mark.parametrize("k", DEPLOYABLE)
def test_references_resolve(rendered, k):
    """What a deployable overlay's pods name exists in it, under the name kustomize gave it (a
    generated name's hash suffix must reach every reference), with the key they read; the
    secrets hold what the operator wrote."""
    have = {(o["kind"], o["metadata"]["name"]): o for o in objects(rendered, k)}
    ns = {o["metadata"].get("namespace") for o in objects(rendered, k) if o["kind"] != "Namespace"}
    assert ns == {"space"}
    for o, spec in pod_specs(rendered, k):
        sa = spec.get("serviceAccountName")
        assert sa is None or ("ServiceAccount", sa) in have, f"{k}: no ServiceAccount {sa}"
        for kind, name, key, optional in refs(spec):
            target = have.get((kind, name))
            if target is None and optional:
                continue
            assert target is not None, f"{k}: {o['metadata']['name']} names {kind} {name}, which is not there"
            if key is not None:
                data = target.get("data", {})
                assert key in data or optional, f"{k}: {kind} {name} has no key {key}"
    secrets = {o["metadata"]["name"]: o for o in objects(rendered, k, "Secret")}
    assert base64.b64decode(secrets["space-api-key"]["data"]["api-key"]).decode() == SECRET_FILES[k + "/secrets/api-key"]
    store = [s for n, s in secrets.items() if n.startswith("space-store") and "url" in s.get("data", {})]
    assert len(store) == 1
    url = base64.b64decode(store[0]["data"]["url"]).decode()
    assert url.startswith("postgres://")


@pytest.mark.parametrize("k", DEPLOYABLE)
def test_the_cluster_trusts_no_network(rendered, k):
    """Nodes admit the api pods only; the bundled PostgreSQL admits spaced's pods only and
    serves TLS; every shipped store URL asks libpq to verify the server."""
    pols = {o["metadata"]["name"]: o for o in objects(rendered, k, "NetworkPolicy")}
    node = pols["space-node"]["spec"]
    assert node["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "node"
    assert [f["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for f in node["ingress"][0]["from"]] == ["api"]
    secrets = {o["metadata"]["name"]: o for o in objects(rendered, k, "Secret")}
    url = base64.b64decode([s for n, s in secrets.items() if n.startswith("space-store")
                            and "url" in s.get("data", {})][0]["data"]["url"]).decode()
    assert "sslmode=verify-full" in url, url
    if k == "overlays/dev":
        pg = pols["space-postgres"]["spec"]
        assert pg["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "space-postgres"}
        assert pg["ingress"][0]["from"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "space"}}}]
        assert [p["port"] for p in pg["ingress"][0]["ports"]] == [5432]
        sts = one(rendered, k, "StatefulSet", "space-postgres")
        args = the_container(sts, "postgres")["args"]
        assert "ssl=on" in args, args
        assert "sslrootcert=/etc/space/store-ca/ca.crt" in url
        for _, spec, c in spaced_containers(rendered, k):
            m = {x["mountPath"]: x["name"] for x in c["volumeMounts"]}
            v = {x["name"]: x for x in spec["volumes"]}
            assert v[m["/etc/space/store-ca"]]["secret"]["secretName"].startswith("space-store-ca")
