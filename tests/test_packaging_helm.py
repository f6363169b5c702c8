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
    empty.write_text("{}\n")
    code, result = chart_check("render", CHART, empty, tmp_path / "out")
    assert code == 1
    assert "set database.url" in result["error"]


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
    worker = next(d for d in by_kind["Deployment"] if d["metadata"]["name"].endswith("-worker"))
    container = worker["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:3] == ["worker", "--name", "$(POD_NAME)"]
    pod_name = next(e for e in container["env"] if e["name"] == "POD_NAME")
    assert pod_name["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert len(by_kind["PodDisruptionBudget"]) == 3
    assert "Secret" in by_kind
    config = next(c for c in by_kind["ConfigMap"] if c["metadata"]["name"].endswith("-config"))
    assert config["data"]["HBGW_METRICS_HOST"] == "0.0.0.0"
    assert config["data"]["HBGW_HOME"] == "/var/lib/hbgw"
