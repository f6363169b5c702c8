"""`hbgw flower`: Flower on the project's Celery app, never open to the network by accident.

Flower must be told who may look: basic auth from ``HBGW_FLOWER_USER`` and
``HBGW_FLOWER_PASSWORD``, or Flower's own OAuth settings (``FLOWER_AUTH_PROVIDER`` and
``FLOWER_AUTH``, with ``FLOWER_OAUTH2_KEY``, ``FLOWER_OAUTH2_SECRET``,
``FLOWER_OAUTH2_REDIRECT_URI``). Without either it starts only on a loopback address and only
when asked with ``--unauthenticated-loopback``.

The credential reaches Flower through its environment (``FLOWER_BASIC_AUTH``), never through
argv, which ``ps`` shows to every user of the machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hbgw.core.errors import BadInput
from hbgw.core.netaddr import is_loopback
from hbgw.core.settings import Settings

OAUTH_VARIABLES = ("FLOWER_AUTH_PROVIDER", "FLOWER_AUTH")
# Flower hides task arguments by default; ours are what an operator looks for (fire ids, the
# session of a drain). FLOWER_TASKS_COLUMNS in the environment still wins.
TASK_COLUMNS = "name,args,state,received,runtime,worker,uuid"


@dataclass(frozen=True)
class FlowerPlan:
    """How Flower is started: its command line (no secret in it) and what it adds to the env."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    auth: str = "none"


def flower_plan(
    settings: Settings,
    environ: Mapping[str, str],
    *,
    host: str | None = None,
    port: int | None = None,
    unauthenticated_loopback: bool = False,
) -> FlowerPlan:
    """The plan, or BadInput when Flower would be reachable without authentication."""
    host = host or settings.flower_host
    port = settings.flower_port if port is None else port
    argv = ["flower", f"--address={host}", f"--port={port}"]
    if "FLOWER_TASKS_COLUMNS" not in environ:
        argv.append(f"--tasks_columns={TASK_COLUMNS}")
    password = settings.flower_password.get_secret_value() if settings.flower_password else ""
    if password:
        return FlowerPlan(argv, {"FLOWER_BASIC_AUTH": _credential(settings.flower_user, password)})
    if all(environ.get(name) for name in OAUTH_VARIABLES):
        return FlowerPlan(argv, auth="oauth")
    if unauthenticated_loopback and is_loopback(host):
        # Flower 2 answers /api/* with 401 when no authentication is configured, unless told.
        return FlowerPlan(argv, {"FLOWER_UNAUTHENTICATED_API": "true"})
    where = f"{host}:{port}"
    if unauthenticated_loopback:
        raise BadInput(
            f"--unauthenticated-loopback only allows a loopback address, not {where}: use "
            "--host 127.0.0.1, or set HBGW_FLOWER_PASSWORD (or Flower's OAuth settings)."
        )
    raise BadInput(
        f"Flower would be open to anyone who reaches {where}: set HBGW_FLOWER_PASSWORD (basic "
        "auth as HBGW_FLOWER_USER) or Flower's OAuth settings (FLOWER_AUTH_PROVIDER, "
        "FLOWER_AUTH, FLOWER_OAUTH2_*), or pass --unauthenticated-loopback with --host 127.0.0.1."
    )


def _credential(user: str, password: str) -> str:
    # Flower splits FLOWER_BASIC_AUTH on commas (a list of user:password pairs) and the pair on
    # its first colon: either in the wrong place would lock everybody out, silently.
    if not user or ":" in user or "," in user:
        raise BadInput(
            f"HBGW_FLOWER_USER {user!r} cannot be used: give a non-empty name without ':' or ','."
        )
    if "," in password:
        raise BadInput(
            "HBGW_FLOWER_PASSWORD cannot contain ',' (Flower splits on it): pick another."
        )
    return f"{user}:{password}"
