"""The worker-scaling plot: fires per worker CPU-second against worker processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt


def scaling_plot(payload: dict[str, Any], path: Path) -> Path:
    """Per busiest worker's CPU-second (what N workers give with a core each), per CPU-second of
    all workers (the cost of a fire), and N × one worker's figure (linear scaling)."""
    phases = payload["result"]["phases"]
    counts = [p["workers"] for p in phases]
    busiest = [p["fires_per_busiest_worker_cpu_s"] or 0 for p in phases]
    every = [p["fires_per_worker_cpu_s"] or 0 for p in phases]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(counts, busiest, "o-", label="fires per busiest worker's CPU-second")
    ax.plot(counts, every, "s--", label="fires per CPU-second of all workers")
    if busiest and busiest[0]:
        ax.plot(counts, [busiest[0] * n for n in counts], ":", color="grey", label="N × one worker")
    loads = ", ".join(f"{p['loadavg_1m'][0]:g}" for p in phases)
    ax.set_xticks(counts)
    ax.set_xlabel(f"worker processes (load average 1 min at each: {loads})")
    ax.set_ylabel("fires per CPU-second")
    ax.set_title(
        f"Workers scaling ({payload['profile']}, {payload['started_at'][:10]}, "
        f"{payload['result']['cpu_count']} cores, 2 API replicas)"
    )
    ax.legend()
    ax.grid(True, alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
