"""The run's report: one JSON file in bench/results/ and a short summary for the terminal."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.checks import GIVEN_BACK, Check
from chaos.evidence import REACHED_AGENT, Evidence
from chaos.faults import Faults
from chaos.profiles import Profile
from chaos.recovery import recovery

if TYPE_CHECKING:
    from chaos.run import Deployment


@dataclass
class Report:
    profile: Profile
    seed: int
    deployment: Deployment
    faults: Faults
    evidence: Evidence
    checks: list[Check]
    began: float
    traffic_ended: float

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def figures(self) -> dict[str, Any]:
        ev, by_name = self.evidence, {c.name: c.figures for c in self.checks}
        states = Counter(r.state for r in ev.runs)
        sends = [d for d in ev.deliveries if d.call == "send"]
        return {
            "faults_injected": len(self.faults.records),
            "fires": sum(n for s, n in states.items() if s in REACHED_AGENT),
            "refunds": sum(n for s, n in states.items() if s in GIVEN_BACK),
            "run_states": dict(states),
            "user_messages_sent": self.deployment.traffic.sent,
            "user_messages_accepted": len(ev.accepted),
            "user_messages_in_sql": len(ev.messages),
            "send_errors": dict(self.deployment.traffic.errors),
            "user_turns": sum(1 for d in sends if d.reply_to is not None),
            "deliveries": len(sends),
            "duplicates": by_name["no_duplicate_fires"]["duplicates"],
            "overlaps": by_name["no_overlapping_turns"]["overlaps"],
            "lost_messages": by_name["messages_answered_once"]["lost"],
            "messages_answered_twice": by_name["messages_answered_once"]["answered_twice"],
            "stale_deliveries": by_name["no_stale_deliveries"]["stale"],
            "heartbeat_replies_lost": by_name["no_stale_deliveries"]["heartbeat_replies_lost"],
            "unfinished_runs": by_name["no_unfinished_runs"]["unfinished"],
            "sent_after_lock_moved": by_name["no_send_after_lock_moved"]["after_lock_moved"],
            "unmarked_repeats": by_name["no_unmarked_repeat"]["unmarked_repeats"],
            "marked_repeats": by_name["no_unmarked_repeat"]["marked_repeats"],
            "max_lateness_s": by_name["heartbeats_on_time"]["max_lateness_s"],
            "lateness_allowance_s": by_name["heartbeats_on_time"]["allowance_s"],
            "load_factor": by_name["heartbeats_on_time"]["load_factor"],
            "process_exits": len(ev.exits),
            "ignored_sigterm": list(self.deployment.cluster.ignored_sigterm),
            "tracebacks": _tracebacks(self.deployment.home / "logs"),
        }

    def to_json(self) -> dict[str, Any]:
        d = self.deployment
        return {
            "profile": self.profile.name,
            "ok": self.ok,
            "seed": self.seed,
            "started": _iso(self.began),
            "duration_s": round(self.evidence.snapshot - self.began, 1),
            "traffic_s": self.profile.traffic,
            "settle_s": round(self.evidence.snapshot - self.traffic_ended, 1),
            "sessions": self.profile.sessions,
            "intervals_s": list(self.profile.intervals),
            "message_rate": self.profile.message_rate,
            "database": d.database.kind + (" (private cluster)" if d.database.private else ""),
            "settings": {k: v for k, v in d.settings.masked().items() if k != "home"},
            "grace_s": self.evidence.grace,
            "figures": self.figures(),
            "faults": [self._fault(i) for i in range(len(self.faults.records))],
            "skipped_faults": self.faults.skipped,
            "skip_notes": self.faults.notes,
            "fault_kinds": list(self.profile.kinds),
            "exits": [vars(e) for e in self.evidence.exits],
            "checks": {c.name: c.to_json() for c in self.checks},
        }

    def _fault(self, i: int) -> dict[str, Any]:
        record = self.faults.records[i]
        out = record.to_json()
        out["at_s"] = round(record.began - self.began, 1)
        if record.ended is not None:
            out.update(recovery(self.evidence, record.began, record.ended))
        return out


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def _tracebacks(logs: Path) -> dict[str, int]:
    """Log records with a traceback, per role: an expected transient failure should have none."""
    out = {}
    for path in sorted(logs.glob("*.log")):
        count = sum(1 for line in path.open(errors="replace") if '"exc":' in line)
        out[path.stem] = count
    return out


def write_report(report: Report, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = out / f"chaos-{report.profile.name}-{stamp}.json"
    path.write_text(json.dumps(report.to_json(), indent=2, default=str) + "\n")
    return path


def summary(report: Report, path: Path) -> str:
    data = report.to_json()
    f = data["figures"]
    lines = [
        f"chaos {data['profile']}: {'PASS' if report.ok else 'FAIL'} — {data['duration_s']}s, "
        f"{data['sessions']} sessions on {data['database']}, seed {data['seed']}",
        f"  faults {f['faults_injected']} ({', '.join(_fault_line(x) for x in data['faults'])})",
        f"  fires {f['fires']}, refunds {f['refunds']}, user turns {f['user_turns']}, "
        f"messages {f['user_messages_in_sql']} (send errors {sum(f['send_errors'].values())})",
        f"  duplicates {f['duplicates']}, overlaps {f['overlaps']}, lost {f['lost_messages']}, "
        f"answered twice {f['messages_answered_twice']}, stale {f['stale_deliveries']}, "
        f"unfinished {f['unfinished_runs']}, after lock moved {f['sent_after_lock_moved']}, "
        f"unmarked repeats {f['unmarked_repeats']}, max lateness {f['max_lateness_s']}s "
        f"(allowed {f['lateness_allowance_s']}s at load ×{f['load_factor']}), "
        f"exits {f['process_exits']}",
    ]
    for name, check in data["checks"].items():
        mark = "ok  " if check["ok"] else "FAIL"
        first = f" — e.g. {check['examples'][0]}" if check["examples"] else ""
        lines.append(f"  {mark} {name}: {check['failures']} failures{first}")
    lines.append(f"  report: {path}")
    return "\n".join(lines)


def _fault_line(fault: dict[str, Any]) -> str:
    target = f" {fault['target']}" if fault["target"] else ""
    rec = fault.get("recovered_s")
    return f"{fault['kind']}{target} @{fault['at_s']}s rec {rec if rec is not None else '∞'}s"
