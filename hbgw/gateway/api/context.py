"""What every request works with, built once per app: settings, store, Redis, tokens, metrics."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from hbgw.core.clock import Clock, utcnow
from hbgw.core.errors import BadInput, HbgwError, NotFound
from hbgw.core.owner_chats import OwnerChats
from hbgw.core.settings import Settings
from hbgw.gateway.api.auth import Principal, TokenTable, chat_refusal
from hbgw.gateway.api.errors import ApiError, not_found
from hbgw.gateway.api.metrics import ApiMetrics
from hbgw.gateway.api.quotas import StreamSlots
from hbgw.gateway.inbound import Answered, InboundParts, Queued, receive
from hbgw.gateway.platforms.served import Served
from hbgw.gateway.public_ids import PublicIds, deployment_ids
from hbgw.sessions.db import make_engine
from hbgw.sessions.grammar import GrammarLimits, limits_from_settings
from hbgw.sessions.quotas import quotas_from_settings
from hbgw.sessions.store import Store
from hbgw.sessions.validation import MessageLimits, check_storable, message_limits_from_settings
from hbgw.sessions.views import SessionView
from hbgw.state.connection import TRANSIENT_REDIS_ERRORS, connect
from hbgw.state.dispatch import Dispatcher
from hbgw.state.keys import Keys
from hbgw.state.redis_part import RedisPart
from hbgw.state.runtime import Runtime, resolve_redis_url
from hbgw.state.shared_clock import shared_clock
from hbgw.state.stream_wake import StreamWaker

log = logging.getLogger("hbgw.api")


@dataclass
class ApiContext:
    settings: Settings
    store: Store
    rt: Runtime | None
    dispatcher: Dispatcher | None
    clock: Clock
    tokens: TokenTable
    ids: PublicIds
    metrics: ApiMetrics = field(default_factory=ApiMetrics)
    streams: StreamSlots = field(default_factory=StreamSlots)
    stopping: threading.Event = field(default_factory=threading.Event)
    """Set when the server shuts down: open event streams end (``stop_streams`` wakes them)."""
    waker: StreamWaker = field(default_factory=lambda: StreamWaker(None, Keys("hbgw")))
    """The process's one pub/sub subscriber, waking the open event streams."""
    served: Served = field(default_factory=lambda: Served(None, frozenset()))
    """The platforms this deployment serves (HBGW_PLATFORMS): sessions on others are refused."""
    owner_chats: OwnerChats = field(default_factory=OwnerChats)
    """The chats an operator bound to owner tokens (HBGW_OWNER_CHATS)."""

    @property
    def redis(self) -> RedisPart | None:
        """Redis' client and key names, for the units that need no more (None without Redis)."""
        return self.rt.redis if self.rt is not None else None

    @property
    def limits(self) -> GrammarLimits:
        return limits_from_settings(self.settings)

    @property
    def message_limits(self) -> MessageLimits:
        return message_limits_from_settings(self.settings)

    def check_chat(self, principal: Principal, platform: str, chat: str) -> None:
        """``ApiError`` 403 when ``principal`` may not open a session on this chat
        (``auth.chat_refusal``): checked before anything is stored."""
        refusal = chat_refusal(principal, platform, chat, self.owner_chats)
        if refusal is not None:
            raise ApiError(403, "forbidden", refusal)

    def session_for(self, principal: Principal, session_id: str) -> SessionView:
        """The session, if this principal may see it; a stranger's answers like a missing one."""
        try:
            check_storable(session_id, "session id")
            session = self.store.sessions.get_session(session_id)
        except (NotFound, BadInput):
            raise not_found(session_id) from None
        if not principal.sees(session.owner):
            raise not_found(session_id)
        return session

    def store_for(self, principal: Principal) -> Store:
        """The store a principal's changes go through: the admin token is the operator's, not
        held to owners' quotas; every other change counts against its owner's."""
        return self.store.operator if principal.admin else self.store

    def receive(
        self,
        session_id: str,
        text: str,
        *,
        idempotency_key: str | None = None,
        store: Store | None = None,
    ) -> Answered | Queued:
        """``gateway.inbound.receive`` with this API's store (or ``store``: ``store_for`` the
        caller), clock, limits, Redis and platforms: what every edge (the API's messages, each
        platform's inbound route) hands a text to."""
        return receive(
            store or self.store,
            session_id,
            text,
            self.clock(),
            self.limits,
            parts=InboundParts.of(self.rt) if self.rt is not None else None,
            dispatcher=self.dispatcher,
            idempotency_key=idempotency_key,
            message_limits=self.message_limits,
            served=self.served,
        )

    def settle(self, *session_ids: str) -> None:
        """Tell the due index about a heartbeat change; when Redis is away, restore catches up."""
        if self.rt is None:
            return
        for sid in session_ids:
            try:
                self.rt.due.settle(sid)
            except TRANSIENT_REDIS_ERRORS as exc:
                log.warning(
                    "the due index was not updated; the restore pass will: %s",
                    exc,
                    extra={"action": "api.settle_failed", "session": sid},
                )

    def wake_streams(self, session_id: str) -> None:
        """The session's open event streams (in every API replica) read SQL now; best effort."""
        if self.rt is not None:
            self.rt.wake_streams(session_id)

    def stop_streams(self) -> None:
        """The server is shutting down: every open event stream ends now, not at its next poll."""
        self.stopping.set()
        self.waker.wake_all()

    def close(self) -> None:
        self.waker.stop()
        if self.rt is not None:
            self.rt.close()
        else:
            self.store.close()


def open_store(settings: Settings) -> Store:
    """The store; a database that is away or behind still gives an app whose /readyz says so."""
    quotas = quotas_from_settings(settings)  # every path through the API's store counts
    try:
        return Store.from_url(settings.effective_database_url, quotas)
    except HbgwError as exc:
        log.warning("the database is not ready: %s", exc, extra={"action": "api.store_not_ready"})
        return Store(make_engine(settings.effective_database_url), quotas)


def build_context(
    settings: Settings, *, celery_app: Any, clock: Clock | None, redis_url: str | None
) -> ApiContext:
    tokens = TokenTable.from_settings(settings)
    store = open_store(settings)
    url = redis_url
    if url is None:
        try:
            url = resolve_redis_url(settings)
        except HbgwError as exc:
            log.warning("no Redis: %s", exc, extra={"action": "api.no_redis"})
    rt = None
    dispatcher = None
    metrics = ApiMetrics()
    # Its own connection (pub/sub holds one for good); none without Redis: streams poll slowly.
    waker = StreamWaker(
        connect(url, settings, retry=False) if url else None, Keys(settings.namespace)
    )
    if url is not None:
        client = connect(url, settings)
        if clock is None:
            # The shared clock: anchors and due times the API writes are compared by beat.
            clock = shared_clock(client, settings, gauge=metrics.clock_offset)
        rt = Runtime(settings=settings, store=store, client=client, worker="api", clock=clock)
        if celery_app is not None:
            dispatcher = Dispatcher(celery_app, rt.keys)
    return ApiContext(
        settings,
        store,
        rt,
        dispatcher,
        clock or utcnow,
        tokens,
        deployment_ids(settings, store.secrets),
        metrics=metrics,
        waker=waker,
        served=Served.from_settings(settings),
        owner_chats=settings.owner_chat_bindings,
    )


def context(request: Request) -> ApiContext:
    ctx = request.app.state.api
    assert isinstance(ctx, ApiContext)
    return ctx


bearer = HTTPBearer(auto_error=False, description="A token of HBGW_API_TOKENS, or the admin's.")


def principal(
    request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)
) -> Principal:
    if credentials is None:
        raise ApiError(401, "unauthorized", "Send a token: Authorization: Bearer <token>.")
    found = context(request).tokens.lookup(credentials.credentials)
    if found is None:
        raise ApiError(401, "unauthorized", "That token is not valid here; check it.")
    return found
