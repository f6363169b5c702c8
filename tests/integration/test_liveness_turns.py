"""What a turn stamps: the phase a platform that hangs on delivery leaves behind is `delivering`."""

from __future__ import annotations

from dataclasses import dataclass, field

from support.harness import Gateway

from hbgw.sessions.states import DeliveryState
from hbgw.state.turn_gate import Began
from hbgw.workers.agents.echo import EchoAgent
from hbgw.workers.locks import Grant, Lease, LockKeeper
from hbgw.workers.ports import Address
from hbgw.workers.runner import turn_parts
from hbgw.workers.turn_io import Delivery, TurnIO


@dataclass
class PhaseAtSend:
    """A channel that notes the session's liveness phase at the moment a message is sent."""

    gw: Gateway
    name: str = "phase-at-send"
    phases: list[str] = field(default_factory=list)

    def send(
        self,
        address: Address,
        text: str,
        *,
        session_id: str,
        kind: str,
        delivery_key: str,
        possible_repeat: bool = False,
        ref: str | None = None,
        guard: object = None,
    ) -> None:
        (stamp,) = [s for s in self.gw.rt.liveness.all() if s.session == session_id]
        self.phases.append(f"{stamp.phase}@{stamp.worker}")

    def typing(self, address: Address, *, session_id: str) -> None:
        pass

    def progress(self, address: Address, text: str, *, session_id: str) -> None:
        pass


def test_delivery_is_stamped_before_the_channel_is_called(gateway: Gateway) -> None:
    channel = PhaseAtSend(gateway)
    io = TurnIO(turn_parts(gateway.rt), EchoAgent(), channel)
    io.stamp("s1", "thinking")
    began = gateway.rt.gate.try_begin_user("s1", "tok", 5000)
    assert isinstance(began, Began)
    with LockKeeper(gateway.rt.gate, "s1", "tok", 5000) as keeper:
        lease = Lease(Grant("s1", "tok", began.fence), keeper)
        io.confirm(lease)  # stamps first: the stamp can block, the send must not wait on it
        sent = io.deliver(lease, Address("slack", "C1"), "hello", Delivery("reply", "k"))
        assert sent.state == DeliveryState.SENT and sent.platform_message_id is None
    assert channel.phases == [f"delivering@{gateway.rt.worker}"]
