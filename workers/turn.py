"""The one turn skeleton, for heartbeat and user turns alike.

admit (``workers/admission.py`` for a fire, the inbox for a message) → begin under the lock
(``begin``: the kind's own fenced start) → agent (``TurnIO.ask``) → fenced mark before
delivery (``mark``: confirm the lock in Redis, then SQL writes the durable mark and the
``pending`` delivery records) → send (``TurnIO.deliver``, one delivery record per message) →
finish (``finish``: the outcome, the reply and the delivery's outcome, one fenced transaction).

One error policy for a turn's own trouble: the agent's failure becomes a visible failure
notice, never silence; a platform that fails a message for now makes its delivery ``retrying``
(sent again later, the same text under the same key, never a new turn:
``workers/delivery_retry.py``); one that refuses it for good becomes that delivery's ``failed``
record, a failed turn and a paused heartbeat, never a dead session; a lost lock
(``TurnAborted``) stops the turn where it stands, and ``aborted`` says, fenced, what never
left. Everything else is the session loop's (``workers/session_loop.py``).
"""

from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from hbgw.core.errors import TurnAborted
from hbgw.core.metrics import gateway_metrics
from hbgw.sessions.states import DeliveryState
from hbgw.sessions.views import DeliveryOutcome, Outbound, ReplyStart
from hbgw.workers.agents.base import TurnRequest
from hbgw.workers.locks import Lease
from hbgw.workers.ports import Address
from hbgw.workers.turn_io import Answer, Delivery, TurnIO, as_sent

P = TypeVar("P")  # what a kind's begin step hands on to the rest of its turn


@dataclass(frozen=True)
class Outgoing:
    """One message a turn sends: its text and what the send is."""

    text: str
    delivery: Delivery

    @property
    def outbound(self) -> Outbound:
        return Outbound(self.delivery.key, self.delivery.kind)

    def marked(self, repeat: bool) -> Outgoing:
        """As it leaves after the mark: a possible repeat says so, in its text too."""
        if not repeat:
            return self
        what = dataclasses.replace(self.delivery, possible_repeat=True)
        return Outgoing(as_sent(self.text, True), what)


@dataclass(frozen=True)
class Composed:
    """What the agent's answer becomes: ``before`` is said first, each stored as it is sent
    (a user turn's heartbeat announcements); ``reply`` is what ``finish`` stores, or None when
    there is nothing to say (a heartbeat's silence: its delivery is ``suppressed``)."""

    answer: Answer
    reply: Outgoing | None
    before: tuple[Outgoing, ...] = ()
    suppressed_key: str | None = None


@dataclass(frozen=True)
class Sent:
    """The reply as it left (marked, if a possible repeat) and how its delivery ended."""

    reply: Outgoing
    outcome: DeliveryOutcome


class Turn(ABC, Generic[P]):
    kind: Literal["heartbeat", "user", "job"]

    def __init__(self, io: TurnIO) -> None:
        self.io = io
        self.parts = io.parts  # the clock, the worker's name, the due index: what every kind uses

    def execute(self, lease: Lease, plan: P) -> None:
        """Everything after the begin step, under the lock, the same for every kind."""
        started, mark, sent = time.monotonic(), None, 0
        try:
            answer = self.io.ask(lease, self.request(plan), self.progress_to(plan))
            composed = self.compose(plan, answer)
            if composed.reply is None:
                assert composed.suppressed_key is not None
                quiet = DeliveryOutcome(composed.suppressed_key, DeliveryState.SUPPRESSED)
                self.finish(lease, plan, composed, None, quiet)
                self._settled(lease, plan, quiet)
                return
            # Nothing leaves before Redis confirms the lock and SQL, fenced, keeps the mark.
            self.io.confirm(lease)
            mark = self.mark(lease, plan, composed)
            if mark is None:
                return  # answered meanwhile: nothing to send
            for n, out in enumerate(composed.before):
                if n:
                    self.io.confirm(lease)  # the last write can block: confirm afresh
                marked = out.marked(mark.possible_repeat)
                outcome = self._send(lease, plan, marked)
                sent += 1
                self.store_sent(lease, marked, outcome)
                self._settled(lease, plan, outcome)
            if composed.before:
                self.io.confirm(lease)
            reply = composed.reply.marked(mark.possible_repeat)
            outcome = self._send(lease, plan, reply)
            sent += 1
            self.finish(lease, plan, composed, Sent(reply, outcome), outcome)
            self._settled(lease, plan, outcome)
        except TurnAborted as exc:
            if getattr(exc, "mid_send", False):
                sent += (
                    1  # stopped by the send guard: an earlier request of that send may have left
                )
            self.aborted(lease, plan, mark, sent)
            raise
        finally:
            gateway_metrics().turn_duration.labels(self.kind).observe(time.monotonic() - started)

    def _send(self, lease: Lease, plan: P, out: Outgoing) -> DeliveryOutcome:
        return self.io.deliver(lease, self.address(plan), out.text, out.delivery)

    def _settled(self, lease: Lease, plan: P, outcome: DeliveryOutcome) -> None:
        """A delivery's outcome is recorded: count it; a route gone for good pauses the
        session's heartbeat (after the finish, whose transaction is fenced on its own)."""
        address = self.address(plan)
        self.io.count(address.platform, outcome)
        self.io.refused_for_good(lease.session_id, address, outcome)

    # -- what each kind says for itself ------------------------------------------------------

    @abstractmethod
    def request(self, plan: P) -> TurnRequest: ...

    @abstractmethod
    def progress_to(self, plan: P) -> Address | None:
        """Where typing and progress may show: None for a heartbeat turn (rule 8)."""

    @abstractmethod
    def address(self, plan: P) -> Address: ...

    @abstractmethod
    def compose(self, plan: P, answer: Answer) -> Composed: ...

    @abstractmethod
    def mark(self, lease: Lease, plan: P, composed: Composed) -> ReplyStart | None:
        """The fenced, durable mark just before the sends, with the delivery records
        ``pending``; None when there is nothing to send any more."""

    def store_sent(self, lease: Lease, out: Outgoing, outcome: DeliveryOutcome) -> None:
        """A message of ``Composed.before`` left (or failed): keep it and its outcome."""
        raise NotImplementedError(f"a {self.kind} turn says nothing before its reply")

    @abstractmethod
    def finish(
        self,
        lease: Lease,
        plan: P,
        composed: Composed,
        sent: Sent | None,
        outcome: DeliveryOutcome,
    ) -> None:
        """The fenced finish: the turn's outcome, its reply and the delivery's ``outcome``."""

    @abstractmethod
    def aborted(self, lease: Lease, plan: P, mark: ReplyStart | None, sent: int) -> None:
        """The lock was lost; ``sent`` messages had left (after ``mark``, if there was one)."""


def outbound_of(composed: Composed) -> list[Outbound]:
    """Every message the mark records as pending, in the order they are sent."""
    reply = [composed.reply] if composed.reply is not None else []
    return [out.outbound for out in (*composed.before, *reply)]
