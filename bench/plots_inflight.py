"""The in-flight plot: model calls one worker process held at once against its resident memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt


def inflight_plot(payload: dict[str, Any], path: Path) -> Path:
    """Peak and idle RSS against the most calls held at once, one point per ``--turns``, with
    the goal's corner (≥ 200 calls, ≤ 300 MB) drawn in."""
    result = payload["result"]
    points = sorted(result["points"], key=lambda p: p["most_in_flight"])
    held = [p["most_in_flight"] for p in points]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(held, [p["rss_peak_mb"] for p in points], "o-", label="resident memory, peak")
    ax.plot(held, [p["rss_idle_mb"] for p in points], "s--", label="resident memory, idle")
    for p in points:
        ax.annotate(
            f"--turns {p['turns']}\n{p['threads_peak']} threads",
            (p["most_in_flight"], p["rss_peak_mb"]),
            textcoords="offset points",
            xytext=(4, 6),
            fontsize="x-small",
        )
    goal = result["goal"]
    ax.axhline(goal["rss_mb"], color="grey", linestyle=":", label=f"goal: ≤ {goal['rss_mb']} MB")
    ax.axvline(
        goal["in_flight"], color="grey", linestyle="-.", label=f"goal: ≥ {goal['in_flight']} calls"
    )
    load = payload.get("machine", {}).get("loadavg", [None])[0]
    ax.set_xlabel(
        f"{result['model_delay_s']:g}-second model calls held at once (one worker process)"
    )
    ax.set_ylabel("worker resident memory, MB")
    ax.set_ylim(0, max(goal["rss_mb"] * 1.15, max(p["rss_peak_mb"] for p in points) * 1.15))
    ax.set_xlim(0, max(goal["in_flight"], *held) * 1.25)
    when = f"{payload.get('profile', '?')}, {str(payload.get('started_at', ''))[:10]}"
    ax.set_title(
        f"Turns in flight against memory ({when}"
        + (f", load {load:.1f})" if load is not None else ")")
    )
    ax.legend(fontsize="small", loc="lower right")
    ax.grid(True, alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
