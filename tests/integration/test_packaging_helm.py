"""The Helm chart lints and renders through the Helm engine with several values files; every
rendered object passes `kubernetes-validate --strict` and checkov, and broken values are refused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.packaging_tools import CHART, DATA, KUBE_VERSION, chart_check, render, run, tool

VALUES = ["default-values.yaml", "production-values.yaml", "minimal-values.yaml"]
SKIPS: dict[str, list[str]] = json.loads((CHART / "ci" / "checkov-skips.json").read_text())


def kinds(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for item in objects:
        out.setdefault(item["object"]["kind"], []).append(item["object"])
    return out


@pytest.mark.parametrize("values", VALUES)
def test_chart_lints_strictly(values: str) -> None:
    code, result = chart_check("lint", CHART, CHART / "ci" / values, KUBE_VERSION)
    assert code == 0, result
    assert result["errors"] == []
    # Helm's severities: 1 info, 2 warning, 3 error.
    assert [m for m in result["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("values", VALUES)
def test_rendered_objects_pass_the_kubernetes_schemas_strictly(values: str, tmp_path: Path) -> None:
    objects = render(CHART / "ci" / values, tmp_path)
    # Custom resources (ServiceMonitor, PrometheusRule) are in crds/, which the Kubernetes
    # schemas do not describe; test_production_values_render_monitoring checks their structure.
    files = sorted(tmp_path.glob("*.yaml"))
    assert len(files) == len([o for o in objects if "/crds/" not in o["file"]]) >= 10
    done = run([tool("kubernetes-validate"), "--strict", "-k", KUBE_VERSION, "--quiet", *files])
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("values", VALUES)
def test_checkov_finds_nothing_unexplained(values: str, tmp_path: Path) -> None:
    render(CHART / "ci" / values, tmp_path)
    skips = ",".join(check for check, files in SKIPS.items() if values in files)
    args: list[str | Path] = ["-d", tmp_path, "--framework", "kubernetes", "--quiet", "--compact"]
    done = run([tool("checkov"), *args, "--skip-download", "--skip-check", skips])
    assert done.returncode == 0, done.stdout[-4000:]


def test_every_skipped_check_is_explained_in_the_chart_readme() -> None:
    readme = (CHART / "README.md").read_text()
    for check in SKIPS:
        assert re.search(rf"^\| `{check}` \| .{{20,}}", readme, flags=re.MULTILINE), check


@pytest.mark.parametrize(
    ("values", "where"),
    [
        # "many" where a number belongs; a secret among the ConfigMap's plain settings
        ("broken-values.yaml", "/worker/replicas"),
        ("secret-in-config-values.yaml", "/config/HBGW_OPENAI_API_KEY"),
    ],
)
def test_values_the_schema_forbids_are_rejected(values: str, where: str, tmp_path: Path) -> None:
    broken = DATA / values
    code, result = chart_check("lint", CHART, broken, KUBE_VERSION)
    assert code == 1
    assert any(where in error for error in result["errors"])
    code, result = chart_check("render", CHART, broken, tmp_path)
    assert code == 1
    assert where in result["error"]


def test_missing_store_urls_stop_the_render_with_a_sentence(tmp_path: Path) -> None:
    empty = tmp_path / "values.yaml"
    empty.write_text("image: {repository: registry.example/heartbeat-gateway}\n")
    code, result = chart_check("render", CHART, empty, tmp_path / "out")
    assert code == 1
    assert "set database.url" in result["error"]


def test_a_missing_image_stops_the_render_with_a_sentence(tmp_path: Path) -> None:
    # Issue 20: the chart named an image that does not exist, and the README set none.
    values = tmp_path / "values.yaml"
    text = (CHART / "ci" / "default-values.yaml").read_text()
    values.write_text("\n".join(line for line in text.splitlines() if "image:" not in line))
    code, result = chart_check("render", CHART, values, tmp_path / "out")
    assert code == 1
    assert "set image.repository to the image you built and pushed" in result["error"]
    assert "docker build" in result["error"]


def test_default_workloads_are_hardened_and_probed(tmp_path: Path) -> None:
    by_kind = kinds(render(CHART / "ci" / "default-values.yaml", tmp_path))
    assert {d["metadata"]["name"].rsplit("-", 1)[1] for d in by_kind["Deployment"]} == {
        "api", "beat", "worker", "flower",
    }  # fmt: skip
    for workload in [*by_kind["Deployment"], *by_kind["Job"]]:
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
        assert mounts == {"/var/lib/hbgw", "/tmp"}
        for container in pod["containers"]:
            ctx = container["securityContext"]
            assert ctx["readOnlyRootFilesystem"] is True
            assert ctx["allowPrivilegeEscalation"] is False
            assert ctx["capabilities"]["drop"] == ["ALL"]
            assert container["resources"]["limits"]
            if workload["kind"] == "Deployment":
                assert container["livenessProbe"] and container["readinessProbe"]
    job = by_kind["Job"][0]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    # The job's own hook Secret and account; the release's Secret, ConfigMap and account are
    # ordinary objects, updated in place on upgrade (issue 20: they were recreated hooks).
    hooks = {
        (o["kind"], o["metadata"]["name"])
        for o in [*by_kind["Secret"], *by_kind["ConfigMap"], *by_kind["ServiceAccount"]]
        if "helm.sh/hook" in o["metadata"].get("annotations", {})
    }
    assert hooks == {
        ("Secret", "hbgw-heartbeat-gateway-migrate"),
        ("ServiceAccount", "hbgw-heartbeat-gateway-migrate"),
    }
    job_pod = job["spec"]["template"]["spec"]
    assert job_pod["serviceAccountName"] == "hbgw-heartbeat-gateway-migrate"
    job_env = {e["name"]: e for e in job_pod["containers"][0]["env"]}
    ref = job_env["HBGW_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    assert ref["name"] == "hbgw-heartbeat-gateway-migrate"
    assert job_env["HBGW_HOME"]["value"] == "/var/lib/hbgw"
    assert "envFrom" not in job_pod["containers"][0]
    worker = next(d for d in by_kind["Deployment"] if d["metadata"]["name"].endswith("-worker"))
    container = worker["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:3] == ["worker", "--name", "$(POD_NAME)"]
    pod_name = next(e for e in container["env"] if e["name"] == "POD_NAME")
    assert pod_name["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert len(by_kind["PodDisruptionBudget"]) == 3
    config = next(c for c in by_kind["ConfigMap"] if c["metadata"]["name"].endswith("-config"))
    assert config["data"]["HBGW_METRICS_HOST"] == "0.0.0.0"
    assert config["data"]["HBGW_HOME"] == "/var/lib/hbgw"


# The platforms' secrets go to the roles that verify (api) and post (api, worker); the default
# webhook URL only to the workers, which POST to it. The broker's URL to every role that
# sends or takes Celery messages.
PLATFORMS = {
    "HBGW_SLACK_SIGNING_SECRET",
    "HBGW_SLACK_BOT_TOKEN",
    "HBGW_TELEGRAM_BOT_TOKEN",
    "HBGW_TELEGRAM_SECRET_TOKEN",
    "HBGW_DISCORD_BOT_TOKEN",
    "HBGW_WEBHOOK_SECRET",
}
STORES = {"HBGW_DATABASE_URL", "HBGW_REDIS_URL", "HBGW_BROKER_URL"}
ROLE_SECRETS = {
    "migrate": {"HBGW_DATABASE_URL"},
    "api": {*STORES, "HBGW_ADMIN_TOKEN", "HBGW_API_TOKENS", "HBGW_API_ID_KEY", *PLATFORMS},
    "beat": {*STORES, "HBGW_ALERT_WEBHOOK", "HBGW_ALERT_WEBHOOK_SECRET"},
    "worker": {*STORES, "HBGW_OPENAI_API_KEY", *PLATFORMS, "HBGW_WEBHOOK_URL", "HBGW_API_ID_KEY"},
    "flower": {"HBGW_REDIS_URL", "HBGW_BROKER_URL", "HBGW_FLOWER_PASSWORD"},
}  # fmt: skip


def _role(workload: dict[str, Any]) -> str:
    return str(workload["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"])


def _secret_keys(workload: dict[str, Any]) -> set[str]:
    container = workload["spec"]["template"]["spec"]["containers"][0]
    sources = [e.get("valueFrom", {}) for e in container.get("env", [])]
    return {source["secretKeyRef"]["key"] for source in sources if "secretKeyRef" in source}


def test_each_role_gets_only_the_secrets_it_uses(tmp_path: Path) -> None:
    # Issue 15: every role, Flower included, used to get the database URL and the model key.
    by_kind = kinds(render(CHART / "ci" / "default-values.yaml", tmp_path))
    workloads = [*by_kind["Deployment"], *by_kind["Job"]]
    assert {_role(w): _secret_keys(w) for w in workloads} == ROLE_SECRETS
    for workload in workloads:
        container = workload["spec"]["template"]["spec"]["containers"][0]
        assert all("secretRef" not in source for source in container.get("envFrom", []))


def test_the_alert_webhook_and_its_signing_secret_are_secret_keys(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        (CHART / "ci" / "default-values.yaml").read_text()
        + "secrets: {adminToken: a, flowerPassword: f, alertWebhook: 'https://hooks.example/T/x',"
        " alertWebhookSecret: whsec}\n"
    )
    by_kind = kinds(render(values, tmp_path / "out"))
    (secret,) = [s for s in by_kind["Secret"] if s["metadata"]["name"].endswith("-secret")]
    assert secret["stringData"]["HBGW_ALERT_WEBHOOK"] == "https://hooks.example/T/x"
    assert secret["stringData"]["HBGW_ALERT_WEBHOOK_SECRET"] == "whsec"
    config = next(c for c in by_kind["ConfigMap"] if c["metadata"]["name"].endswith("-config"))
    assert not [k for k in config["data"] if k.startswith("HBGW_ALERT")]


def _policies(values: Path, tmp_path: Path) -> dict[str, dict[str, Any]]:
    by_kind = kinds(render(values, tmp_path))
    return {p["metadata"]["name"].rsplit("-", 1)[1]: p["spec"] for p in by_kind["NetworkPolicy"]}


def test_network_policies_are_on_by_default_and_an_empty_list_denies(tmp_path: Path) -> None:
    # Issue 15: off by default, and on with monitoringFrom empty it rendered `from: []`, which
    # Kubernetes reads as "from anywhere": Flower and /metrics were open to every pod.
    policies = _policies(CHART / "ci" / "default-values.yaml", tmp_path / "default")
    assert set(policies) == {"api", "internal"}
    assert policies["internal"]["policyTypes"] == ["Ingress"]
    assert policies["internal"]["ingress"] == []  # no rule: nothing may connect
    for spec in policies.values():
        for rule in spec["ingress"]:
            assert rule.get("from", [None]) != [], rule
    production = _policies(CHART / "ci" / "production-values.yaml", tmp_path / "production")
    (rule,) = production["internal"]["ingress"]
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]


def test_redis_tls_files_reach_only_the_roles_that_use_redis(tmp_path: Path) -> None:
    by_kind = kinds(render(CHART / "ci" / "production-values.yaml", tmp_path))
    for workload in [*by_kind["Deployment"], *by_kind["Job"]]:
        pod = workload["spec"]["template"]["spec"]
        container = pod["containers"][0]
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        if _role(workload) == "migrate":  # SQL only: no Redis certificate, no client key
            assert "redis-tls" not in volumes and "HBGW_REDIS_TLS_KEY" not in env
            continue
        assert volumes["redis-tls"]["secret"]["secretName"] == "hbgw-redis-tls"
        assert mounts["redis-tls"]["readOnly"] is True
        assert env["HBGW_REDIS_TLS_CA"] == "/etc/hbgw/redis-tls/ca.crt"
        assert env["HBGW_REDIS_TLS_CERT"] == "/etc/hbgw/redis-tls/tls.crt"
        assert env["HBGW_REDIS_TLS_KEY"] == "/etc/hbgw/redis-tls/tls.key"
