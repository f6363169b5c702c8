"""Text made safe to print on a terminal: control characters shown, never obeyed.

A prompt, a reply or a chat name may carry ANSI or OSC escape sequences (colours, cursor moves,
a new window title, hyperlinks, clipboard writes). Printed raw they act on the operator's
terminal; printed through ``inert`` they appear as ``\\x1b[31m`` and do nothing. Stored text
stays as it came: this is for display only.
"""

from __future__ import annotations

import re

__all__ = ["inert", "one_line"]

# What ``str.splitlines`` (and so a log reader) takes for a line break besides those ``_CONTROL``
# already escapes: newline, and the line and paragraph separators.
_BREAK = re.compile("[\n\u2028\u2029]")
# C0 controls except tab and newline, DEL, C1 controls, and the bidirectional overrides and
# isolates that reorder what is shown (U+202A-U+202E, U+2066-U+2069).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def inert(text: str) -> str:
    """``text`` with every control character but newline and tab written as a visible escape."""
    return _CONTROL.sub(_visible, text)


def one_line(text: str) -> str:
    """``inert(text)`` with its line breaks escaped too (``\\n``): a reply printed into a log
    stays on its own line and cannot forge another record."""
    return _BREAK.sub(_escaped_break, inert(text))


def _escaped_break(match: re.Match[str]) -> str:
    return "\\n" if match.group() == "\n" else f"\\u{ord(match.group()):04x}"
