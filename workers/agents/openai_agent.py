"""An agent backed by any OpenAI-compatible Chat Completions endpoint, through the official client.

One turn: [system prompt] + the conversation from SQL + the turn's user message, then a tool loop
of at most ``HBGW_AGENT_MAX_STEPS`` model calls. The client itself retries 429, 5xx and timeouts
(``HBGW_OPENAI_MAX_RETRIES``, bounded); what still fails is an ``AgentError`` of one sentence —
never the API key — and the turn fails visibly. Tokens are summed over the turn's calls and come
back with the reply, or with the failure when some were spent before it.

Heartbeat turns may use a cheaper model (``HBGW_OPENAI_HEARTBEAT_MODEL``); the system prompt and
the tool list are the same objects for both kinds of turn (rule 5) — with
``HBGW_OPENAI_TOOLS=false`` no tools at all, for either kind, for a local model that cannot call
them. An endpoint's refusal
(``HTTP 400``) carries its own reason — OpenAI's ``{"error": {"message": …}}`` or Ollama's
``{"error": "…"}`` — into the sentence and the worker's log, one line, bounded, the key starred.
"""

from __future__ import annotations

import functools
import json
import logging
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import openai

from hbgw.core.usage import TokenUsage, added
from hbgw.workers.agents.base import AgentReply, StepCallback, TurnFailed, TurnRequest
from hbgw.workers.agents.model_loop import ModelLoop
from hbgw.workers.agents.tools import run_tool, tool_list

# The gateway's words (failure notices, slash-command answers, heartbeat-change announcements)
# are not sent as history: TurnIO leaves them out, so the model never learns to imitate them.
ROLES = {"user": "user", "assistant": "assistant"}

# Statuses the client retries by itself (besides every 5xx).
RETRIED = frozenset({408, 409, 429})

log = logging.getLogger("hbgw.agent")

# The most of an endpoint's own error message a sentence quotes.
REASON_CHARS = 200

# A local endpoint may need no key; the client insists on one, so it gets a harmless stand-in.
NO_KEY = "unused"


@dataclass(frozen=True)
class OpenAIConfig:
    base_url: str
    model: str
    api_key: str | None = None
    heartbeat_model: str | None = None
    timeout: float = 60.0
    max_retries: int = 2
    max_steps: int = 8
    heartbeat_write: bool = False
    send_tools: bool = True
    max_in_flight: int = 256  # model requests of the process out at once


class OpenAIAgent:
    name = "openai"

    def __init__(self, config: OpenAIConfig) -> None:
        self.config = config
        # The requests of every turn on one loop (workers/agents/model_loop.py): a turn's
        # thread waits on a future, not on a socket of its own.
        self.calls = ModelLoop(functools.partial(async_client, config), config.max_in_flight)
        # An agent dropped unclosed (a test's) still closes its connections; the finalizer
        # holds the loop, never the agent.
        weakref.finalize(self, self.calls.close, wait=False)
        self.where = endpoint_host(config.base_url)
        self.tools = tool_list(config.heartbeat_write) if config.send_tools else ()
        self.tool_names = tuple(t["function"]["name"] for t in self.tools)

    def run(self, request: TurnRequest, on_step: StepCallback) -> AgentReply:
        model = self.model_for(request)
        messages = conversation(request)
        usage: TokenUsage | None = None
        for _ in range(self.config.max_steps):
            on_step("thinking")
            completion = self._complete(model, messages, usage)
            if completion.usage is not None:
                spent = completion.usage
                reported = completion.model or model
                usage = added(usage, spent.prompt_tokens, spent.completion_tokens, reported)
            if not completion.choices:
                raise TurnFailed("The model endpoint answered without a choice.", usage)
            message = completion.choices[0].message
            calls = message.tool_calls or []
            if not calls:
                return AgentReply((message.content or "").strip(), usage)
            messages.append(message.model_dump(exclude_none=True, exclude_unset=True))
            for call in calls:
                messages.append(self._tool_result(call, request, on_step, usage))
        raise TurnFailed(
            f"The agent used all {self.config.max_steps} steps (HBGW_AGENT_MAX_STEPS) without "
            "a final answer.",
            usage,
        )

    def close(self) -> None:
        self.calls.close()

    def model_for(self, request: TurnRequest) -> str:
        if request.model:
            return request.model  # a cron job's own choice
        if request.kind == "heartbeat" and self.config.heartbeat_model:
            return self.config.heartbeat_model
        return self.config.model

    def _complete(
        self, model: str, messages: list[dict[str, Any]], usage: TokenUsage | None
    ) -> Any:
        # No tools at all is no `tools` key: some servers refuse an empty list as well.
        extra: dict[str, Any] = {"tools": list(self.tools)} if self.tools else {}
        try:
            return self.calls.call(
                lambda client: client.chat.completions.create(
                    model=model,
                    messages=messages,  # type: ignore[arg-type]
                    **extra,
                )
            )
        except openai.OpenAIError as exc:
            sentence = self.explain(exc)
            log.warning("model call failed: %s", sentence, extra={"action": "agent.model_failed"})
            raise TurnFailed(sentence, usage, unreachable=unreachable(exc)) from exc

    def _tool_result(
        self, call: Any, request: TurnRequest, on_step: StepCallback, usage: TokenUsage | None
    ) -> dict[str, Any]:
        name = getattr(getattr(call, "function", None), "name", None) or "unknown"
        on_step(f"tool:{name}")  # stamps liveness and checks the lease before the tool runs
        try:
            result = run_tool(name, call.function.arguments, request.heartbeat, self.tool_names)
        except TurnFailed as exc:
            raise TurnFailed(str(exc), usage, unreachable=exc.unreachable) from exc
        return {"role": "tool", "tool_call_id": call.id, "content": result}

    def explain(self, exc: openai.OpenAIError) -> str:
        """One sentence for the chat; exceptions' own text may quote request details, so it is
        not repeated (the key in particular never is)."""
        attempts = self.config.max_retries + 1
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        at = self.where
        if isinstance(exc, openai.APITimeoutError):
            return f"The model at {at} did not answer within {self.config.timeout:g}s ({tries})."
        if isinstance(exc, openai.APIConnectionError):
            return f"The model endpoint at {at} could not be reached ({tries})."
        if isinstance(exc, openai.APIStatusError):
            code = exc.status_code
            retried = code in RETRIED or code >= 500
            head = f"The model endpoint at {at} answered HTTP {code}"
            why = error_reason(exc.response, self.config.api_key)
            head += f": {why}" if why else ""
            return head + (f" ({tries})." if retried else ".")
        if isinstance(exc, openai.APIResponseValidationError):
            return f"The model endpoint at {at} answered something that is not a chat completion."
        return f"The model call failed: {type(exc).__name__}."


def async_client(config: OpenAIConfig) -> openai.AsyncOpenAI:
    """The client of the model loop; it retries by itself (``max_retries``), on the loop."""
    return openai.AsyncOpenAI(
        base_url=config.base_url,
        api_key=config.api_key or NO_KEY,
        timeout=config.timeout,
        max_retries=config.max_retries,
    )


def endpoint_host(base_url: str) -> str:
    """Where the model is, for a failure sentence: the host and port only — never a user name,
    password or path of HBGW_OPENAI_BASE_URL, which may carry credentials."""
    try:
        parts = urlsplit(base_url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return "HBGW_OPENAI_BASE_URL"
    if not host:
        return "HBGW_OPENAI_BASE_URL"
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}" if port is not None else shown


def error_reason(response: Any, api_key: str | None = None) -> str | None:
    """The endpoint's own reason from an error body — ``{"error": {"message": …}}`` (OpenAI,
    vLLM, llama.cpp's server) or ``{"error": "…"}`` (Ollama) — on one line, printable, at most
    ``REASON_CHARS`` characters, the API key starred should the endpoint echo it."""
    try:
        body = json.loads(response.text)
    except (AttributeError, ValueError, TypeError):
        return None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        error = error.get("message")
    if not isinstance(error, str):
        return None
    text = " ".join("".join(c if c.isprintable() else " " for c in error).split())
    if api_key and len(api_key) >= 8:  # a one-letter stand-in would star every such letter
        text = text.replace(api_key, "***")
    text = text.rstrip(".")
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1].rstrip() + "…"


def unreachable(exc: openai.OpenAIError) -> bool:
    """The endpoint was not there to answer (a later try may find it), not a refusal."""
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    return isinstance(exc, openai.APIStatusError) and (
        exc.status_code in RETRIED or exc.status_code >= 500
    )


def conversation(request: TurnRequest) -> list[dict[str, Any]]:
    """System prompt, history as user/assistant messages, then the turn's text as a user message
    (a heartbeat's prompt too: rule 5, it is an ordinary user message)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": request.system_prompt}]
    for role, text in request.history:
        if role in ROLES:
            messages.append({"role": ROLES[role], "content": text})
    messages.append({"role": "user", "content": request.text})
    return messages
