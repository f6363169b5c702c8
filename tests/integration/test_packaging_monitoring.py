"""The production-like values render the monitoring objects: their structure (kubernetes-validate
does not know these custom resources), and every metric they name exists in the code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from support.packaging_tools import CHART, render

from hbgw.core.metrics import GatewayMetrics
from hbgw.gateway.api.metrics import ApiMetrics

SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
ALERTS = {
    "HbgwStalledTurns",
    "HbgwDueBacklogGrowing",
    "HbgwFireLagHigh",
    "HbgwNoLiveWorker",
    "HbgwRefundsSpiking",
    "HbgwClockSkew",
}


def exposed_names(*registries: CollectorRegistry) -> set[str]:
    """Sample names as /metrics shows them, labelled families included."""
    names: set[str] = set()
    for registry in registries:
        for family in registry.collect():
            names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return names


def production(tmp_path: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for item in render(CHART / "ci" / "production-values.yaml", tmp_path):
        out.setdefault(item["object"]["kind"], []).append(item["object"])
    return out


def test_production_values_render_monitoring_and_policies(tmp_path: Path) -> None:
    by_kind = production(tmp_path)
    assert "Secret" not in by_kind  # existingSecret
    assert len(by_kind["HorizontalPodAutoscaler"]) == 1
    assert len(by_kind["NetworkPolicy"]) == 2
    monitor = by_kind["ServiceMonitor"][0]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert {e["port"] for e in monitor["spec"]["endpoints"]} == {"http", "metrics"}
    rule = by_kind["PrometheusRule"][0]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    rules = [r for group in rule["spec"]["groups"] for r in group["rules"]]
    assert {r["alert"] for r in rules} == ALERTS
    for r in rules:
        assert r["expr"] and re.fullmatch(r"[0-9]+[smh]", r["for"]), r
        assert r["labels"]["severity"] in {"warning", "critical"}
        assert r["annotations"]["summary"]


def test_alerts_and_dashboard_name_only_metrics_the_code_exposes(tmp_path: Path) -> None:
    by_kind = production(tmp_path)
    dashboards = [
        c for c in by_kind["ConfigMap"] if c["metadata"]["labels"].get("grafana_dashboard")
    ]
    assert len(dashboards) == 1 and dashboards[0]["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(dashboards[0]["data"]["heartbeat-gateway.json"])
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    rule = by_kind["PrometheusRule"][0]
    exprs += [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]
    used = {name for expr in exprs for name in re.findall(r"\bhbgw_[a-z_]+", expr)}
    known = exposed_names(GatewayMetrics().registry, ApiMetrics().registry)
    assert used - known == set()
    assert len(used) >= 12
