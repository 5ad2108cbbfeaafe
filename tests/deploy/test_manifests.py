"""The Kubernetes manifests in deploy/kubernetes/ say what the reference page says.

Every manifest parses; the hot-standby variant has the changes of the page's "Kubernetes" section
(replicas 2, Parallel, a volume per pod, tcpSocket startup and liveness probes on 8801, the gRPC
readiness probe, OnDelete), its config has hot standby with lease.failIfHeld false, and its
PrometheusRule carries the three alerts of "Lease duration and alerts" verbatim. The config in
each ConfigMap passes `dex-server-zd serve --check` (DEX_BIN_DIR, set by CTest, else build/bin).
"""
import os
import pathlib
import re
import subprocess

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
VARIANTS = ("single", "hot-standby")

SPEC_ALERTS = [
    'sum(dexzd_hot_standby_state{state="following"}) == 0',
    'max_over_time(dexzd_hot_standby_state{state=~"failed|restarting"}[5m]) == 1',
    "dexzd_hot_standby_lag_seconds > 5",
]
COMMAND = ["dex-server-zd", "serve", "--config", "/etc/dex/config.yaml"]
API_PORT = 8801
# api.healthListen: the plaintext gRPC health listener the kubelet's probes ask (they cannot
# speak TLS, and api.tls may be on).
HEALTH_PORT = 8803


def load(variant):
    docs = []
    for path in sorted((KUBE / variant).glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                docs.append((path.name, doc))
    return docs


def objects(variant):
    return [d for name, d in load(variant) if name != "kustomization.yaml"]


def one(variant, kind, name=None):
    found = [d for d in objects(variant)
             if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{variant}: expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def container(sts):
    containers = sts["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def config_of(variant):
    """The serve config embedded in the ConfigMap that the StatefulSet mounts, and its text."""
    sts = one(variant, "StatefulSet")
    c = container(sts)
    config_path = c["command"][c["command"].index("--config") + 1]
    mount = next(m for m in c["volumeMounts"] if config_path.startswith(m["mountPath"] + "/"))
    volume = next(v for v in sts["spec"]["template"]["spec"]["volumes"]
                  if v["name"] == mount["name"])
    cm = one(variant, "ConfigMap", volume["configMap"]["name"])
    text = cm["data"][config_path[len(mount["mountPath"]) + 1:]]
    return yaml.safe_load(text), text


def duration_seconds(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", text)
    assert m, text
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_manifest_parses_and_the_kustomization_lists_every_file(variant):
    docs = load(variant)
    assert docs
    for name, doc in docs:
        assert doc.get("apiVersion") and doc.get("kind"), name
        if doc["kind"] != "Kustomization":
            assert doc["metadata"]["name"], name
    kustomization = [d for name, d in docs if name == "kustomization.yaml"]
    assert len(kustomization) == 1
    files = {p.name for p in (KUBE / variant).glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization[0]["resources"]) == files


def test_no_file_names_a_registry_host():
    registries = re.compile(r"docker\.io|ghcr\.io|quay\.io|gcr\.io|ecr\.|azurecr\.io|registry\.")
    for path in KUBE.rglob("*"):
        if path.is_file():
            assert not registries.search(path.read_text()), path


@pytest.mark.parametrize("variant", VARIANTS)
def test_statefulset_runs_serve_with_the_config_a_volume_and_the_s3_credentials(variant):
    sts = one(variant, "StatefulSet")
    spec = sts["spec"]
    pod = spec["template"]
    assert spec["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    c = container(sts)
    assert c["command"] == COMMAND
    assert API_PORT in [p["containerPort"] for p in c["ports"]]
    assert HEALTH_PORT in [p["containerPort"] for p in c["ports"]]

    # The placeholder image is obviously one and names no registry host.
    assert "replace-me" in c["image"]
    first = c["image"].split("/")[0]
    assert "/" not in c["image"] or not ("." in first or ":" in first or first == "localhost")

    # A volume per pod from one claim template (the same size for every pod), and the local
    # store on it.
    config, _ = config_of(variant)
    templates = spec["volumeClaimTemplates"]
    assert len(templates) == 1
    assert templates[0]["spec"]["resources"]["requests"]["storage"]
    data_mount = next(m for m in c["volumeMounts"] if m["name"] == templates[0]["metadata"]["name"])
    assert config["localStore"]["path"].startswith(data_mount["mountPath"] + "/")

    # Credentials come from a Secret through the environment, never from the config.
    env = {e["name"]: e for e in c["env"]}
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert env[key]["valueFrom"]["secretKeyRef"]["key"] == key
    assert config["objectStore"]["type"] == "s3"
    assert "credentials" not in config["objectStore"]

    # Graceful shutdown drains attempts and then releases the lease: the grace period must be
    # longer than the drain timeout, with a margin for the commit and the release.
    drain = duration_seconds(config["lifecycle"]["attemptDrainTimeout"])
    assert drain == 30
    assert pod["spec"]["terminationGracePeriodSeconds"] >= drain + 15

    # The API listens where the probes and the Service look.
    assert config["api"]["listen"] == f"0.0.0.0:{API_PORT}"
    assert config["api"]["healthListen"] == f"0.0.0.0:{HEALTH_PORT}"
    assert config["nodeId"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_token_secret_is_mounted_for_the_commented_auth_block(variant):
    # docs/operations.md, "Access tokens": an optional Secret with a token file per role, and the
    # ConfigMap's auth block (commented out) naming each file under its mount.
    sts = one(variant, "StatefulSet")
    c = container(sts)
    mount = next(m for m in c["volumeMounts"] if m["name"] == "tokens")
    assert mount["mountPath"] == "/etc/dex-tokens" and mount["readOnly"] is True
    volume = next(v for v in sts["spec"]["template"]["spec"]["volumes"] if v["name"] == "tokens")
    assert volume["secret"]["secretName"] == "dex-tokens" and volume["secret"]["optional"] is True
    text = (KUBE / variant / "configmap.yaml").read_text()
    for role in ("client", "worker", "viewer", "admin"):
        assert f"#     {role}: {{files: [/etc/dex-tokens/{role}]}}" in text, role


@pytest.mark.parametrize("variant", VARIANTS)
def test_services_select_the_pods_and_the_governing_service_is_headless(variant):
    sts = one(variant, "StatefulSet")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    api = one(variant, "Service", "dex")
    assert api["spec"]["selector"].items() <= labels.items()
    assert [p["port"] for p in api["spec"]["ports"]] == [API_PORT]
    governing = one(variant, "Service", sts["spec"]["serviceName"])
    assert governing["spec"]["clusterIP"] == "None"
    assert governing["spec"]["publishNotReadyAddresses"] is True
    assert governing["spec"]["selector"].items() <= labels.items()


def test_single_replica_is_the_base_example_with_grpc_probes_and_a_60s_lease():
    spec = one("single", "StatefulSet")["spec"]
    assert spec["replicas"] == 1
    c = container(one("single", "StatefulSet"))
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert c[probe]["grpc"]["port"] == HEALTH_PORT, probe
        assert c[probe]["grpc"].get("service", "") == "", probe
    config, _ = config_of("single")
    assert config["lease"]["duration"] == "60s"
    assert "standby" not in config and "metrics" not in config


def test_hot_standby_statefulset_has_the_changes_of_the_reference_page():
    sts = one("hot-standby", "StatefulSet")
    spec = sts["spec"]
    assert spec["replicas"] == 2
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["updateStrategy"]["type"] == "OnDelete"
    assert len(spec["volumeClaimTemplates"]) == 1

    c = container(sts)
    # A standby never passes a startup or liveness probe on gRPC health.
    for probe in ("startupProbe", "livenessProbe"):
        handlers = set(c[probe]) & {"grpc", "httpGet", "exec", "tcpSocket"}
        assert handlers == {"tcpSocket"}, probe
        assert c[probe]["tcpSocket"]["port"] == API_PORT, probe
    # Readiness stays on gRPC health with the default service name: only the active is ready.
    assert set(c["readinessProbe"]) & {"grpc", "httpGet", "exec", "tcpSocket"} == {"grpc"}
    assert c["readinessProbe"]["grpc"]["port"] == HEALTH_PORT
    assert c["readinessProbe"]["grpc"].get("service", "") == ""

    # The hot-standby variant changes only what the page says it changes.
    base = one("single", "StatefulSet")
    assert container(base)["command"] == c["command"]
    assert base["spec"]["volumeClaimTemplates"] == spec["volumeClaimTemplates"]
    assert base["spec"]["serviceName"] == spec["serviceName"]
    assert base["spec"]["selector"] == spec["selector"]


def test_hot_standby_config_follows_the_reference_page():
    config, _ = config_of("hot-standby")
    assert config["standby"]["mode"] == "hot"
    assert config["lease"]["failIfHeld"] is False
    assert config["lease"]["duration"] == "10s"
    # Both variants are one node: the same nodeId and object storage.
    single, _ = config_of("single")
    assert config["nodeId"] == single["nodeId"]
    assert config["objectStore"] == single["objectStore"]

    # The metrics port is exposed by the container, the headless Service and the PodMonitor.
    port = int(config["metrics"]["listen"].rsplit(":", 1)[1])
    c = container(one("hot-standby", "StatefulSet"))
    name = next(p["name"] for p in c["ports"] if p["containerPort"] == port)
    governing = one("hot-standby", "Service", one("hot-standby", "StatefulSet")["spec"]["serviceName"])
    assert port in [p["port"] for p in governing["spec"]["ports"]]
    monitor = one("hot-standby", "PodMonitor")
    assert [e["port"] for e in monitor["spec"]["podMetricsEndpoints"]] == [name]
    labels = one("hot-standby", "StatefulSet")["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_prometheus_rule_has_the_three_alerts_of_the_reference_page_verbatim():
    rule = one("hot-standby", "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    rules = [r for g in rule["spec"]["groups"] for r in g["rules"]]
    assert all("alert" in r for r in rules)
    assert [r["expr"] for r in rules] == SPEC_ALERTS


def test_every_alert_with_a_for_says_why_in_a_comment_above_it():
    # Issue 13 item 7: the expressions are the spec's; a `for:` added to one is explained.
    lines = (KUBE / "hot-standby" / "prometheusrule.yaml").read_text().splitlines()
    rules = [r for g in one("hot-standby", "PrometheusRule")["spec"]["groups"] for r in g["rules"]]
    fors = [i for i, line in enumerate(lines) if line.strip().startswith("for:")]
    assert len(fors) == sum(1 for r in rules if "for" in r)
    for i in fors:
        comment = []
        j = i - 1
        while j >= 0 and lines[j].strip().startswith("#"):
            comment.insert(0, lines[j].strip().lstrip("#").strip())
            j -= 1
        why = " ".join(comment)
        assert why.startswith("Why `for`:") and len(why) > 40, (
            f"line {i + 1} ({lines[i].strip()}) needs a comment above it saying why: {why!r}")


def test_operations_guide_shows_the_same_alert_expressions():
    text = (ROOT / "docs" / "operations.md").read_text()
    for expr in SPEC_ALERTS:
        assert expr in text


@pytest.mark.parametrize("variant", VARIANTS)
def test_embedded_config_passes_serve_check(variant, tmp_path):
    # CTest sets DEX_BIN_DIR; run by hand, the default build directory (never a skip).
    bin_dir = os.environ.get("DEX_BIN_DIR") or str(ROOT / "build" / "bin")
    server = pathlib.Path(bin_dir) / "dex-server-zd"
    assert server.exists(), f"{server} is missing: build first (scripts/build), or set DEX_BIN_DIR"
    _, text = config_of(variant)
    path = tmp_path / "config.yaml"
    path.write_text(text)
    env = dict(os.environ, AWS_ACCESS_KEY_ID="check-only", AWS_SECRET_ACCESS_KEY="check-only")
    r = subprocess.run([str(server), "serve", "--config", str(path), "--check"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"--check refused the {variant} config:\n{r.stdout}{r.stderr}"


@pytest.mark.parametrize("variant", VARIANTS)
def test_termination_grace_period_exceeds_the_attempt_drain_timeout(variant):
    """SIGTERM drains running attempts for up to lifecycle.attemptDrainTimeout before the release
    (docs/node.md); Kubernetes kills the process at terminationGracePeriodSeconds, so the grace
    period must leave room for the drain and the release (a few seconds)."""
    sts = one(variant, "StatefulSet")
    grace = sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    config, _ = config_of(variant)
    drain = duration_seconds(config.get("lifecycle", {}).get("attemptDrainTimeout", "30s"))
    assert grace >= drain + 10, f"{variant}: grace {grace}s, drain {drain}s"
