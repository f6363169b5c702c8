"""The end-to-end lag plot: p50 and p99 lag against the offered rate, ours vs celery-redbeat.

``bench/plots.py`` draws it with the others (``plot_e2e``); it reads the ``systems`` part of an
e2e result, as written to bench/results/e2e-*.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "docs" / "img" / "bench-e2e-lag.png"
STYLES = {
    "ours-sqlite": ("tab:blue", "o"),
    "ours-postgresql": ("tab:green", "s"),
    "redbeat": ("tab:red", "^"),
}


def lag_plot(systems: dict[str, list[dict[str, Any]]], path: Path = DEFAULT_PATH) -> Path:
    """p50 (dashed) and p99 (solid) lag per offered rate, one colour per system; log scales."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, phases in systems.items():
        points = [p for p in phases if p["lag_s"]["p99"] is not None]
        if not points:
            continue
        colour, marker = STYLES.get(name, ("tab:gray", "x"))
        rates = [p["offered_per_s"] for p in points]
        p99 = [max(p["lag_s"]["p99"], 1e-4) for p in points]
        p50 = [max(p["lag_s"]["p50"], 1e-4) for p in points]
        ax.plot(rates, p99, color=colour, marker=marker, label=f"{name} p99")
        ax.plot(rates, p50, color=colour, marker=marker, linestyle="--", label=f"{name} p50")
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":", label="1 s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offered fires per second (sessions at a 1 s interval)")
    ax.set_ylabel("lag from due time to agent start (s)")
    ax.set_title("End to end: 1 beat + 2 workers, echo agent")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def throughput_plot(systems: dict[str, list[dict[str, Any]]], path: Path, note: str = "") -> Path:
    """Delivered fires a second against the offered rate, one line per system, and y = x."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    top = 0
    for name, phases in systems.items():
        if not phases:
            continue
        colour, marker = STYLES.get(name, ("tab:gray", "x"))
        rates = [p["offered_per_s"] for p in phases]
        top = max(top, *rates)
        ax.plot(
            rates, [p["delivered_per_s"] for p in phases], color=colour, marker=marker, label=name
        )
    ax.plot(
        [0, top], [0, top], color="black", linewidth=0.8, linestyle=":", label="delivered = offered"
    )
    ax.set_xlabel("offered fires per second (sessions at a 1 s interval)")
    ax.set_ylabel("delivered fires per second (agent starts)")
    ax.set_title("End to end: 1 beat + 2 workers, echo agent" + (f" ({note})" if note else ""))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
