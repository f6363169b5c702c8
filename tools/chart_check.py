"""Lint and render the Helm chart with the Helm engine from the tools venv (.venv-tools).

Run by tests/integration/test_packaging_helm.py as
``.venv-tools/bin/python tools/chart_check.py``: the project's own venv does not carry
helm-python-sdk. Prints one JSON object on stdout.

    chart_check.py lint CHART VALUES KUBE_VERSION
    chart_check.py render CHART VALUES OUTDIR

``render`` writes each rendered object into OUTDIR (custom resources into OUTDIR/crds, which the
Kubernetes schemas do not know) and prints the objects. Exit 1 when Helm refuses.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import helm_python
import yaml

CRD_GROUPS = ("monitoring.coreos.com/",)


def load_values(path: str) -> dict[str, Any]:
    values = yaml.safe_load(Path(path).read_text()) or {}
    assert isinstance(values, dict), f"{path}: values must be a mapping"
    return values


def lint(chart: str, values_path: str, kube_version: str) -> int:
    result = helm_python.lint(
        chart, load_values(values_path), strict=True, kube_version=kube_version
    )
    print(json.dumps(result))
    return 1 if result.get("errors") else 0


def render(chart: str, values_path: str, outdir: str) -> int:
    try:
        rendered = helm_python.Chart.load(chart).render(
            load_values(values_path), name="hbgw", namespace="hbgw", is_install=True
        )
    except helm_python.HelmError as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    out = Path(outdir)
    (out / "crds").mkdir(parents=True, exist_ok=True)
    objects = []
    for template, text in sorted(rendered.items()):
        if not template.endswith(".yaml"):
            continue
        for doc in yaml.safe_load_all(text):
            if not doc:
                continue
            crd = doc["apiVersion"].startswith(CRD_GROUPS)
            name = f"{doc['kind']}-{doc['metadata']['name']}.yaml".lower()
            target = out / "crds" / name if crd else out / name
            target.write_text(yaml.safe_dump(doc, sort_keys=False))
            objects.append({"template": template, "file": str(target), "object": doc})
    print(json.dumps({"objects": objects}))
    return 0


def main(argv: list[str]) -> int:
    command, *args = argv
    if command == "lint":
        return lint(*args)
    if command == "render":
        return render(*args)
    raise SystemExit(f"unknown command {command!r}; use lint or render")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
