"""A check's verdict, and what every check reads first: the sends in the order they left."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chaos.evidence import Delivery, Evidence

EXAMPLES = 10


@dataclass
class Check:
    name: str
    failures: list[str] = field(default_factory=list)
    tolerated: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "failures": len(self.failures),
            "examples": self.failures[:EXAMPLES],
            "tolerated": len(self.tolerated),
            "tolerated_examples": self.tolerated[:EXAMPLES],
            **self.figures,
        }


def sends_in_order(ev: Evidence) -> list[Delivery]:
    return sorted((d for d in ev.deliveries if d.call == "send"), key=lambda d: d.at)
