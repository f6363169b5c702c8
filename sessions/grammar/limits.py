"""The limits the grammar enforces, and the one place they are read from the settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hbgw.core.errors import IntervalError
from hbgw.sessions.grammar.intervals import parse_interval

if TYPE_CHECKING:
    from hbgw.core.settings import Settings


# Room besides the prompt: a stored schedule is at most 255 characters (SCHEDULE_CHARS), the
# policy words (hours with a zone, budget, model, for, times, dedupe, backoff) fit in the rest.
COMMAND_ROOM = 1024


@dataclass(frozen=True)
class GrammarLimits:
    min_interval: float = 60
    """Smallest interval, in seconds; anything shorter is an error, never a silent clamp."""
    default_interval: int = 300
    """Seconds between fires of ``/heartbeat <prompt>`` (no schedule given)."""
    max_prompt_chars: int = 4000
    """Longest prompt accepted."""
    jitter: bool = True
    """Heartbeats set by a command are staggered (HBGW_JITTER), unless they say ``exact``."""
    allowed_models: tuple[str, ...] = ()
    """The models ``model NAME`` may choose (HBGW_ALLOWED_MODELS)."""
    daily_tokens: int | None = None
    """The budget of a heartbeat set without ``budget`` (HBGW_HEARTBEAT_DAILY_TOKENS)."""
    dedupe: int = 0
    """Seconds a repeated reply is held back when a command names no ``dedupe`` (HBGW_DEDUPE,
    24h unless set; 0 here: off, for callers that build limits without the settings)."""

    @property
    def max_command_chars(self) -> int:
        """Longest /heartbeat or /cron line read at all: the longest prompt and room for the
        command word, a schedule and its policies. Checked before any pattern looks at it, so
        a long line costs one length check, whatever its shape."""
        return self.max_prompt_chars + COMMAND_ROOM


def limits_from_settings(settings: Settings) -> GrammarLimits:
    """HBGW_MIN_INTERVAL, HBGW_DEFAULT_INTERVAL, HBGW_MAX_PROMPT_CHARS, HBGW_JITTER and
    HBGW_DEDUPE as grammar limits."""
    try:
        default = parse_interval(settings.default_interval, minimum=settings.min_interval)
    except IntervalError as exc:
        # Without the variable's name the sentence would read like a complaint about user input.
        raise IntervalError(f"HBGW_DEFAULT_INTERVAL is not usable: {exc}") from exc
    return GrammarLimits(
        min_interval=settings.min_interval,
        default_interval=default,
        max_prompt_chars=settings.max_prompt_chars,
        jitter=settings.jitter,
        allowed_models=settings.allowed_model_names,
        daily_tokens=settings.heartbeat_daily_tokens,
        dedupe=_dedupe(settings.dedupe),
    )


def _dedupe(text: str) -> int:
    if text.strip() in ("0", "off"):
        return 0
    try:
        return parse_interval(text, minimum=1)
    except IntervalError as exc:
        raise IntervalError(f"HBGW_DEDUPE is not usable (0 turns it off): {exc}") from exc
