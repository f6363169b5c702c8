"""``python -m chaos.recheck RUN_DIR/evidence.json``: the checks again, on a kept run's evidence.

Every run writes the evidence its checks read (ledger, messages, channel records, faults) to
``evidence.json`` in its run directory (kept with ``--keep``), so a change to the checks can be
tried on a real run without running the system again.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from chaos.checks import run_checks
from chaos.evidence import (
    Attempt,
    Delivery,
    Disruption,
    Evidence,
    Heartbeat,
    Job,
    ProcessExit,
    Reply,
    Run,
    TenantSession,
    UserMessage,
    WebhookHit,
)

RECORDS: dict[str, type] = {
    "runs": Run,
    "messages": UserMessage,
    "replies": Reply,
    "deliveries": Delivery,
    "heartbeats": Heartbeat,
    "jobs": Job,
    "faults": Disruption,
    "exits": ProcessExit,
    "webhook": WebhookHit,
    "attempts": Attempt,
    "tenant_sessions": TenantSession,
}


def save(ev: Evidence, path: Path) -> None:
    path.write_text(json.dumps(asdict(ev)) + "\n")


def load(path: Path) -> Evidence:
    data: dict[str, Any] = json.loads(path.read_text())
    known = {f.name for f in fields(Evidence)}
    values = {k: v for k, v in data.items() if k in known}
    for name, record in RECORDS.items():
        values[name] = [record(**item) for item in data.get(name, [])]
    return Evidence(**values)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m chaos.recheck", description=__doc__)
    parser.add_argument("evidence", type=Path)
    args = parser.parse_args(argv)
    checks = run_checks(load(args.evidence))
    for check in checks:
        first = f" — e.g. {check.failures[0]}" if check.failures else ""
        print(f"{'ok  ' if check.ok else 'FAIL'} {check.name}: {len(check.failures)}{first}")
    raise SystemExit(0 if all(c.ok for c in checks) else 1)


if __name__ == "__main__":
    main()
