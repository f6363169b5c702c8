"""`hbgw watch SESSION`: follow what a session delivers, without typing into it.

A CLI session's replies and heartbeat turns go to the console channel, which writes them into a
worker's log; the API's events stream carries every delivered message. This prints each as it
is delivered, marked by kind as `hbgw chat` does: ``agent> `` a reply, ``agent ♥> `` a heartbeat
turn's answer, ``notice: `` the gateway's own words (a failed turn, a heartbeat change).
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from hbgw.chat.client import ApiClient
from hbgw.chat.events import EventStream, Moved
from hbgw.chat.terminal import Screen, render


def run_watch(
    client: ApiClient,
    session_id: str,
    *,
    last: int = 5,
    out: TextIO | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Print the last ``last`` messages, then every delivery until ``stop`` or Ctrl-C; 0 then.
    An answer retrying cannot change (unknown session, bad token) is raised."""
    screen = Screen(out or sys.stdout, interactive=False)
    info = client.get_session(session_id)
    active = str(info.get("active_id") or session_id)
    if active != session_id:
        screen.say(f"Session {session_id} continues as {active} (compressed).")
    recent = client.history(active, last=last) if last > 0 else []
    for message in recent:
        shown = render(message, live=False)
        if shown is not None:
            screen.say(shown)
    problems: list[str] = []
    opened: list[bool] = []
    stream = EventStream(
        client,
        active,
        after=recent[-1].id if recent else None,
        stop=stop,
        on_problem=lambda sentence, _delay: _once(screen, problems, sentence),
        # Said once the stream is open: what is delivered from then on is shown (a session with
        # no message yet starts at the stream's opening, so a word before it could be missed).
        on_connect=lambda: _back(screen, problems, active, opened),
    )
    try:
        for item in stream:
            if isinstance(item, Moved):
                screen.say(f"Session compressed: it continues as {item.moved_to}.")
                continue
            shown = render(item, live=True)
            if shown is not None:
                screen.say(shown)
    except KeyboardInterrupt:
        screen.say("")
    finally:
        stream.close()
    return 0


def _once(screen: Screen, problems: list[str], sentence: str) -> None:
    if not problems:  # one sentence per outage, not one per retry
        screen.say(f"(paused) {sentence}")
    problems.append(sentence)


def _back(screen: Screen, problems: list[str], active: str, opened: list[bool]) -> None:
    if not opened:
        opened.append(True)
        screen.say(f"Watching session {active}: its deliveries as they come; Ctrl-C stops.")
    elif problems:
        screen.say("(following again)")
    problems.clear()
