"""A fake OpenAI-compatible Chat Completions endpoint: a FastAPI app with a script of answers.

``POST /v1/chat/completions`` pops the next scripted step and answers it in the OpenAI shape; every
request body is recorded. With no script left it answers a plain text, so a test that forgot a
step sees it in the reply. Errors carry ``retry-after-ms`` (as OpenAI's do) so the client's own
retries are quick. Serve it with ``support.http_server.serving``; the agent's base URL is
``<url>/v1``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from support.harness import Gateway, gateway_settings
from support.http_server import serving

UNSCRIPTED = "(the fake endpoint has no script left)"


@dataclass(frozen=True)
class Text:
    content: str
    prompt_tokens: int = 11
    completion_tokens: int = 7


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str = "{}"
    prompt_tokens: int = 13
    completion_tokens: int = 5


@dataclass(frozen=True)
class Fail:
    """An error answer; ``body`` replaces OpenAI's shape (Ollama's native API says
    ``{"error": "…"}``, a proxy may say anything)."""

    status: int = 500
    body: Any = None


@dataclass(frozen=True)
class Delay:
    """Answer ``then`` only after ``seconds``: longer than the client's timeout, a timeout."""

    seconds: float
    then: Text = Text("too late")


Step = Text | ToolCall | Fail | Delay


@dataclass
class FakeOpenAI:
    script: deque[Step] = field(default_factory=deque)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)  # each request's header
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def then(self, *steps: Step) -> FakeOpenAI:
        with self._lock:
            self.script.extend(steps)
        return self

    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.bodies)

    def take(self, body: dict[str, Any]) -> Step:
        with self._lock:
            self.bodies.append(body)
            return self.script.popleft() if self.script else Text(UNSCRIPTED)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def completions(request: Request) -> JSONResponse:
            body = await request.json()
            with self._lock:
                self.authorizations.append(request.headers.get("authorization"))
            step = self.take(body)
            if isinstance(step, Delay):
                await asyncio.sleep(step.seconds)
                step = step.then
            if isinstance(step, Fail):
                default = {"error": {"message": "scripted failure", "type": "server_error"}}
                return JSONResponse(
                    default if step.body is None else step.body,
                    status_code=step.status,
                    headers={"retry-after-ms": "10"},
                )
            return JSONResponse(self.completion(body["model"], step))

        return app

    def completion(self, model: str, step: Text | ToolCall) -> dict[str, Any]:
        n = next(self._ids)
        if isinstance(step, Text):
            message: dict[str, Any] = {"role": "assistant", "content": step.content}
            finish = "stop"
        else:
            call = {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": step.name, "arguments": step.arguments},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        prompt, completion = step.prompt_tokens, step.completion_tokens
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }


def set_args(schedule: str, prompt: str) -> str:
    return json.dumps({"schedule": schedule, "prompt": prompt})


@contextmanager
def openai_gateway(
    tmp_path: Path, redis_url: str, redis_ns: str, **overrides: object
) -> Iterator[tuple[Gateway, FakeOpenAI]]:
    endpoint = FakeOpenAI()
    with serving(endpoint.app()) as url:
        settings = gateway_settings(
            tmp_path,
            redis_url,
            redis_ns,
            agent="openai",
            openai_base_url=f"{url}/v1",
            openai_model="main-model",
            openai_heartbeat_model="cheap-model",
            openai_api_key="sk-test-key",
            **overrides,
        )
        gw = Gateway(settings, redis_url)
        try:
            yield gw, endpoint
        finally:
            gw.close()
