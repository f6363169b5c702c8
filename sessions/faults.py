"""Which database failures are an outage (a dropped connection, a server away or busy) rather
than a bug: the layers above log one line for an outage, and a traceback only for the rest."""

from __future__ import annotations

from sqlalchemy import exc as sa

_OUTAGES = (sa.OperationalError, sa.InterfaceError, sa.DisconnectionError, sa.TimeoutError)


def is_outage(error: BaseException) -> bool:
    if isinstance(error, sa.DBAPIError) and error.connection_invalidated:
        return True
    return isinstance(error, _OUTAGES)
