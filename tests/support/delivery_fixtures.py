"""A Slack deployment whose agent is the fake OpenAI endpoint (its requests are the model calls
a test counts), with delivery retries due at once (no backoff): the `retrying` fixture."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hbgw.sessions.views import RunView
from support.fake_openai import FakeOpenAI
from support.harness import wait_until
from support.http_server import serving
from support.slack_fixtures import Slack, slack_deployment


@contextmanager
def retrying_deployment(
    tmp_path: Path, redis_url: str, redis_ns: str, **overrides: object
) -> Iterator[tuple[Slack, FakeOpenAI]]:
    model = FakeOpenAI()
    with serving(model.app()) as url:
        values: dict[str, object] = {
            "agent": "openai",
            "openai_base_url": f"{url}/v1",
            "openai_model": "main-model",
            "openai_api_key": "sk-test-key",
            "delivery_backoff": 0,
            "slack_timeout": 1,
            **overrides,
        }
        with slack_deployment(tmp_path, redis_url, redis_ns, **values) as slack:
            yield slack, model


def retried(slack: Slack, sid: str, state: str) -> RunView:
    """Ask beat for the due retries (as its restore pass does) until the session's one run's
    delivery is ``state``."""
    gw = slack.gw

    def settled() -> RunView | None:
        gw.beat.ask_delivery_retries(gw.rt.now_ms())
        [run] = gw.runs(sid)
        return run if run.delivery is not None and run.delivery.state == state else None

    return wait_until(settled, 30, f"the delivery {state}")  # type: ignore[no-any-return]


def fire_once(slack: Slack, sid: str) -> RunView:
    """A heartbeat of ``sid`` due now, fired by beat, its run finished."""
    gw = slack.gw
    gw.due_now(sid)
    gw.tick()
    [run] = gw.final_runs(sid)
    assert isinstance(run, RunView)
    return run
