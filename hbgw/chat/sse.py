"""Server-sent events, parsed as the HTML standard says ("Interpreting an event stream").

Pure: lines in, events out. Multi-line ``data`` is joined with newlines, ``:`` lines are comments,
one leading space after the colon is dropped, an event is dispatched at a blank line and only when
it carried data. The id persists from event to event, as the last event id a reconnect sends.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

# Only CR, LF and CRLF end a line: str.splitlines would also split inside JSON at U+2028.
_EOL = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class SseEvent:
    event: str
    data: str
    id: str | None
    """The last event id in effect when this event was dispatched (None before any)."""


@dataclass
class SseParser:
    last_id: str | None = None
    retry_ms: int | None = None
    _event: str = ""
    _data: list[str] | None = None

    def feed(self, line: str) -> SseEvent | None:
        """One line without its line terminator; an event when this line completes one."""
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data = [*(self._data or []), value]
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self.last_id = value or None
        elif field == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        data, event = self._data, self._event
        self._data, self._event = None, ""
        if data is None:
            return None
        return SseEvent(event=event or "message", data="\n".join(data), id=self.last_id)


def parse(lines: Iterable[str], parser: SseParser | None = None) -> Iterator[SseEvent]:
    """Every complete event in ``lines``; an unterminated last event is dropped (the standard)."""
    parser = parser or SseParser()
    for raw in lines:
        for line in _EOL.split(raw.removesuffix("\n").removesuffix("\r")):
            event = parser.feed(line)
            if event is not None:
                yield event
