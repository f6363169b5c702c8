"""PNG plots of the newest benchmark results: ``python -m bench.plots``.

One function per plot, each reading the newest ``bench/results/<name>-*.json`` it needs and
returning the PNG written, or None (with a message) when that result is missing. ``PLOTS`` lists
them; ``write_all`` runs each (the runner calls it after the full profile).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from bench.latest import newest
from bench.plots_e2e import lag_plot, throughput_plot
from bench.plots_inflight import inflight_plot
from bench.plots_scaling import scaling_plot

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
IMAGES = ROOT / "docs" / "img"


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_claim(results: Path = RESULTS, out: Path = IMAGES) -> Path | None:
    """Dispatch throughput against scheduled heartbeats, ours and celery-redbeat, log x."""
    payload = newest("claim", results)
    if payload is None:
        return None
    result = payload["result"]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ours = result.get("ours", [])
    if ours:
        xs = [o["scheduled"] for o in ours]
        ax.plot(xs, [o["fires_per_s"]["median"] for o in ours], "o-", label="heartbeat gateway")
        lo = [o["fires_per_s"]["min"] for o in ours]
        hi = [o["fires_per_s"]["max"] for o in ours]
        ax.fill_between(xs, lo, hi, alpha=0.2)
    redbeat = result.get("redbeat", [])
    if redbeat:
        xs = [r["scheduled"] for r in redbeat]
        ax.plot(xs, [r["sends_per_s"] for r in redbeat], "s--", label="celery-redbeat")
    ax.axhline(100_000, color="grey", linestyle=":", label="goal: 100k fires/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("scheduled heartbeats, all due")
    ax.set_ylabel("fires published per second (one beat)")
    ax.set_title(f"Claim + publish throughput ({payload['profile']}, {payload['started_at'][:10]})")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, out / "bench-claim.png")


def plot_tick(results: Path = RESULTS, out: Path = IMAGES) -> Path | None:
    """One tick's cost with 1,000 due against scheduled heartbeats, with and without restore."""
    payload = newest("tick", results)
    if payload is None:
        return None
    sizes = payload["result"]["sizes"]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for kind, label, style in (
        ("without_restore_s", "tick without the restore pass", "o-"),
        ("with_restore_s", "tick with the restore pass", "s--"),
    ):
        points = [(s["scheduled"], s[kind]["median"]) for s in sizes if s[kind]["median"]]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, [y * 1000 for y in ys], style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("scheduled heartbeats (1,000 due)")
    ax.set_ylabel("one tick, ms")
    ax.set_title(f"Beat tick cost ({payload['profile']}, {payload['started_at'][:10]})")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, out / "bench-tick.png")


def plot_memory(results: Path = RESULTS, out: Path = IMAGES) -> Path | None:
    """Redis bytes per scheduled idle session, ours and celery-redbeat."""
    payload = newest("memory", results)
    if payload is None:
        return None
    result = payload["result"]
    names = ["heartbeat gateway", "celery-redbeat"]
    values = [
        result["ours_bytes_per_session"]["median"],
        result["redbeat_bytes_per_session"]["median"],
    ]
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.bar(names, values, color=["tab:blue", "tab:orange"])
    ax.axhline(200, color="grey", linestyle=":", label="goal: 200 bytes")
    ax.set_ylabel("Redis bytes per idle scheduled session")
    ax.set_title(f"Memory at {result['sessions']:,} sessions")
    ax.legend()
    return _save(fig, out / "bench-memory.png")


Plot = Callable[[Path, Path], "Path | None"]


# Add a plot here: a function (results dir, image dir) -> the PNG written, or None.
def plot_e2e(results: Path = RESULTS, out: Path = IMAGES) -> Path | None:
    """p50 and p99 lag from due time to agent start against the offered rate (bench/plots_e2e)."""
    payload = newest("e2e", results)
    if payload is None:
        return None
    return lag_plot(payload["result"]["systems"], out / "bench-e2e-lag.png")


def plot_e2e_throughput(results: Path = RESULTS, out: Path = IMAGES) -> Path | None:
    """Delivered against offered fires a second, ours and celery-redbeat (bench/plots_e2e)."""
    payload = newest("e2e", results)
    if payload is None:
        return None
    load = payload.get("machine", {}).get("loadavg", [None])[0]
    note = str(payload.get("started_at", ""))[:10] + (f", load {load:.1f}" if load else "")
    return throughput_plot(payload["result"]["systems"], out / "bench-e2e-throughput.png", note)


def plot_inflight(results: Path = RESULTS, out: Path = IMAGES) -> Path | None:
    """Model calls held at once by one worker against its memory (bench/plots_inflight)."""
    payload = newest("inflight", results)
    if payload is None:
        return None
    return inflight_plot(payload, out / "bench-inflight.png")


def plot_workers_scaling(results: Path = RESULTS, out: Path = IMAGES) -> Path | None:
    """Fires per worker CPU-second with 1, 2 and 4 workers (bench/plots_scaling)."""
    payload = newest("workers_scaling", results)
    if payload is None:
        return None
    return scaling_plot(payload, out / "bench-workers-scaling.png")


PLOTS: dict[str, Plot] = {
    "claim": plot_claim,
    "tick": plot_tick,
    "memory": plot_memory,
    "e2e": plot_e2e,
    "e2e_throughput": plot_e2e_throughput,
    "inflight": plot_inflight,
    "workers_scaling": plot_workers_scaling,
}


def write_all(results: Path = RESULTS, out: Path = IMAGES) -> list[Path]:
    written = []
    for name, plot in PLOTS.items():
        path = plot(results, out)
        if path is None:
            print(f"plots: no {name} result in {results}, skipped", flush=True)
        else:
            print(f"plots: {name} -> {path}", flush=True)
            written.append(path)
    return written


if __name__ == "__main__":
    write_all()
    sys.exit(0)
