"""The checks added with issue 15 (run with the others from chaos/checks.py's ``ALL_CHECKS``):
no send under a lock that moved on, no repeat that does not say so, and recovery bounded per
fault and not growing over a run."""

from __future__ import annotations

from collections import defaultdict

from chaos.evidence import Delivery, Evidence, Run
from chaos.recovery import recovery
from chaos.verdict import Check, sends_in_order

# -- a send under a lock that moved on, and repeats that do not say so ------------------------


def _sender_fence(d: Delivery, runs: dict[str, Run]) -> int | None:
    if d.fence is not None:
        return d.fence
    run = runs.get(d.ref or "")
    # A repeat without a fence of its own may come from a later grant than its fire's.
    return run.fence if run is not None and not d.repeat else None


def _turn_began(d: Delivery, typing: dict[tuple[str, str], list[float]]) -> float | None:
    """A user reply's turn began at its last typing signal before the send."""
    times = [t for t in typing.get((d.session, d.reply_to or ""), []) if t <= d.at]
    return max(times) if times else None


def send_after_lock_moved(ev: Evidence) -> Check:
    """No send leaves after a newer grant of its session was made (the ledger's reservations are
    the grants SQL keeps, each with its fence and time). A send's fence is the record's own
    ``fence``, else its fire's; a user reply without one was sent under a grant older than its
    turn's typing signal, so any fire reserved between that signal and the send is newer."""
    check = Check("no_send_after_lock_moved")
    runs = {r.fire_id: r for r in ev.runs}
    grants: dict[str, list[Run]] = defaultdict(list)
    for r in ev.runs:
        grants[r.session].append(r)
    typing: dict[tuple[str, str], list[float]] = defaultdict(list)
    for d in ev.deliveries:
        if d.call == "typing" and d.reply_to is not None:
            typing[(d.session, d.reply_to)].append(d.at)
    unjudged = 0
    for d in sends_in_order(ev):
        fence, since = _sender_fence(d, runs), None
        if fence is None:
            since = _turn_began(d, typing) if d.reply_to is not None and not d.ref else None
            if since is None:
                unjudged += 1
                continue
        newer = [
            g
            for g in grants[d.session]
            if g.reserved < d.at
            and (g.fence > fence if fence is not None else since is not None and g.reserved > since)
        ]
        if newer:
            g = min(newer, key=lambda g: g.reserved)
            who = f"fence {fence}" if fence is not None else f"message {d.reply_to}'s turn"
            check.failures.append(
                f"{d.kind} to {d.session} at {d.at:.2f} ({who}) sent {d.at - g.reserved:.2f}s "
                f"after fence {g.fence} was granted ({g.fire_id})"
            )
    check.figures.update(after_lock_moved=len(check.failures), unjudged=unjudged)
    return check


def _delivery_identity(d: Delivery) -> tuple[str, ...] | None:
    if d.delivery_key:
        return ("key", d.delivery_key)
    if d.ref:
        return ("fire", d.ref)
    if d.reply_to is not None:
        return ("message", d.session, d.reply_to)
    return None


def unmarked_repeat(ev: Evidence) -> Check:
    """The same message or fire sent twice: every copy but one says ``repeat``, in any order —
    the older grant's copy, unmarked, may arrive after the newer grant's marked one (a process
    paused between its last check and its send)."""
    check = Check("no_unmarked_repeat")
    copies: dict[tuple[str, ...], list[Delivery]] = {}
    for d in sends_in_order(ev):
        identity = _delivery_identity(d)
        if identity is not None:
            copies.setdefault(identity, []).append(d)
    marked = 0
    for identity, sent in copies.items():
        marked += sum(1 for d in sent if d.repeat)
        unmarked = [d for d in sent if not d.repeat]
        for d in unmarked[1:]:
            check.failures.append(
                f"{d.kind} to {d.session} ({' '.join(identity[1:])}) sent again "
                f"{d.at - sent[0].at:.2f}s after the first, neither copy marked repeat"
            )
    check.figures.update(unmarked_repeats=len(check.failures), marked_repeats=marked)
    return check


# -- recovery: bounded per fault, not growing over a run --------------------------------------


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


GROWTH = 2.0  # the last third's median may be at most this times the first third's


def recovery_bounded(ev: Evidence) -> Check:
    """Each fault recovers within the bound (times the load factor), and a fault kind that
    repeats does not take longer and longer: its last third's median recovery is at most twice
    its first third's, or twice the run's lock lease, whichever is more (``growth_floor``: one
    fault's recovery varies by up to a lease with where it strikes, so a first third under a
    lease is no baseline). Recovery is measured in the fault's own window, up to the next fault
    (chaos/recovery.py)."""
    check = Check("recovery_bounded")
    bound = ev.recovery_bound * ev.load_factor
    times: dict[str, list[float]] = defaultdict(list)
    for n, f in enumerate(sorted(ev.faults, key=lambda f: f.began), 1):
        took = recovery(ev, f.began, f.ended)["recovered_s"]
        where = f"fault {n} ({f.kind}{' ' + f.target if f.target else ''})"
        if took is None:
            check.failures.append(f"{where}: never recovered")
            continue
        times[f.kind].append(took)
        if took > bound:
            check.failures.append(f"{where}: recovered in {took:.1f}s, over {bound:.1f}s")
    for kind, series in times.items():
        third = len(series) // 3
        if third == 0:
            continue
        first, last = _median(series[:third]), _median(series[-third:])
        if last > GROWTH * max(first, ev.growth_floor):
            check.failures.append(
                f"{kind}: recovery grew over the run, median {first:.1f}s in the first third, "
                f"{last:.1f}s in the last"
            )
    check.figures.update(
        bound_s=round(bound, 2), recovered_s={k: v for k, v in times.items()},
    )  # fmt: skip
    return check
