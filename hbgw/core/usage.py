"""Token usage of an agent turn: heartbeats cost money, so every turn says what it spent."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TokenUsage:
    """Tokens a turn spent, summed over its model calls, and the model that answered."""

    prompt_tokens: int
    completion_tokens: int
    model: str

    def plus(self, prompt_tokens: int, completion_tokens: int, model: str) -> TokenUsage:
        return TokenUsage(
            self.prompt_tokens + prompt_tokens, self.completion_tokens + completion_tokens, model
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def added(
    usage: TokenUsage | None, prompt_tokens: int, completion_tokens: int, model: str
) -> TokenUsage:
    """``usage`` with one more model call counted (``None`` is nothing spent yet)."""
    if usage is None:
        return TokenUsage(prompt_tokens, completion_tokens, model)
    return usage.plus(prompt_tokens, completion_tokens, model)


def usage_of(
    prompt_tokens: int | None, completion_tokens: int | None, model: str | None
) -> TokenUsage | None:
    """Stored usage columns as one value; None when the turn's agent counted no tokens."""
    if prompt_tokens is None or completion_tokens is None:
        return None
    return TokenUsage(prompt_tokens, completion_tokens, model or "")
