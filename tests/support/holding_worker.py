"""A Celery worker with heartbeat-gateway's consumer and one task that holds until released.

``python -m support.holding_worker REDIS_URL DIRECTORY``: the task ``test.hold(name)`` writes
``DIRECTORY/started-NAME``, waits for ``DIRECTORY/release`` and writes ``DIRECTORY/done-NAME``.
The real fire tasks hand their work on in milliseconds, so one in flight across a broker
reconnect is rare; this one stays in flight for as long as a test needs.
"""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

from hbgw.celery_app import make_celery
from hbgw.core.logs import configure_logging
from hbgw.core.settings import Settings
from hbgw.state.dispatch import AppContext, attach_context

QUEUE = "test.hold"
NAMESPACE = "hold"  # the Celery keys' prefix: a sender's app must use the same
HOLD_LIMIT = 120.0  # seconds; the task gives up, so a failed test leaves no thread behind


def main(url: str, directory: Path) -> None:
    settings = Settings(home=directory, redis_url=url, namespace=NAMESPACE)
    configure_logging(settings, worker="hold")
    app = make_celery(settings, url)
    attach_context(app, AppContext(settings))

    @app.task(name="test.hold")  # type: ignore[untyped-decorator]
    def hold(name: str) -> None:
        (directory / f"started-{name}").touch()
        deadline = time.monotonic() + HOLD_LIMIT
        while not (directory / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        (directory / f"done-{name}").touch()

    worker = app.Worker(
        hostname=f"hold@{socket.gethostname()}",
        queues=[QUEUE],
        pool="threads",
        concurrency=2,
        loglevel="INFO",
        without_mingle=True,
        without_gossip=True,
    )
    worker.start()
    sys.exit(worker.exitcode or 0)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
