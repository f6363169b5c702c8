"""What a turn stamps: the phase a platform that hangs on delivery leaves behind is `delivering`."""

from __future__ import annotations

from dataclasses import dataclass, field

from support.harness import Gateway

from workers.agents.echo import EchoAgent
from workers.ports import Address
from workers.turn_io import TurnIO


@dataclass
class PhaseAtSend:
    """A channel that notes the session's liveness phase at the moment a message is sent."""

    gw: Gateway
    name: str = "phase-at-send"
    phases: list[str] = field(default_factory=list)

    def send(
        self, address: Address, text: str, *, session_id: str, kind: str, ref: str | None = None
    ) -> None:
        (stamp,) = [s for s in self.gw.rt.liveness.all() if s.session == session_id]
        self.phases.append(f"{stamp.phase}@{stamp.worker}")

    def typing(self, address: Address, *, session_id: str) -> None:
        pass

    def progress(self, address: Address, text: str, *, session_id: str) -> None:
        pass


def test_delivery_is_stamped_before_the_channel_is_called(gateway: Gateway) -> None:
    channel = PhaseAtSend(gateway)
    io = TurnIO(gateway.rt, EchoAgent(), channel)
    io.stamp("s1", "thinking")
    assert io.deliver(Address("slack", "C1"), "hello", "s1", "reply") is None
    assert channel.phases == [f"delivering@{gateway.rt.worker}"]
