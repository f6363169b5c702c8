"""The interactive loop of `hbgw chat`: read lines, send them, show replies as they arrive.

The main thread reads input and sends it; a daemon thread follows the events stream and
prints each reply, notice and heartbeat turn the moment it is delivered. Its lines are written
above the prompt, which is then redrawn with what the user had typed so far.
"""

from __future__ import annotations

import signal
import sys
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import TextIO

from hbgw.chat.client import ApiClient, ApiError, ApiUnreachable, ChatMessage, CommandReply
from hbgw.chat.events import EventStream, Moved
from hbgw.core.terminal import inert

PROMPT = "you> "
HEARTBEAT_HEADER = "[Heartbeat"
CLEAR_LINE = "\r\x1b[K"


def _readline() -> ModuleType | None:
    try:
        import readline  # line editing for input(), and the buffer to redraw under a reply
    except ImportError:  # pragma: no cover - Python built without it
        return None
    return readline


def _labelled(label: str, text: str) -> str:
    """``label`` before the first line; later lines indented under the text."""
    lines = inert(text).split("\n") or [""]
    pad = " " * len(label)
    return "\n".join([label + lines[0], *(pad + line for line in lines[1:])])


def heartbeat_prompt(text: str) -> str:
    """The instruction of a heartbeat message, without the header the worker wraps it in."""
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) > 1 and lines[0].startswith(HEARTBEAT_HEADER):
        return lines[1]
    return lines[0] if lines else ""


def render(message: ChatMessage, *, live: bool) -> str | None:
    """How a message is shown; None for the user's own words on the live stream (typed already)
    and for a silent heartbeat answer (the chat never received it)."""
    if message.silent:
        return None
    if message.role == "user":
        if message.kind == "heartbeat" or message.heartbeat:
            return _labelled("♥ heartbeat: ", heartbeat_prompt(message.text))
        return None if live else _labelled(PROMPT, message.text)
    if message.role == "assistant":
        label = "agent ♥> " if message.heartbeat else "agent> "
        return _labelled(label, message.text)
    return _labelled("notice: ", message.text)


@dataclass
class Screen:
    """Output shared by both threads; keeps the prompt and the typed text on the last line."""

    out: TextIO
    interactive: bool
    readline: ModuleType | None = None
    prompting: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def say(self, text: str) -> None:
        with self.lock:
            if self.prompting and self.interactive:
                typed = self.readline.get_line_buffer() if self.readline else ""
                self.out.write(f"{CLEAR_LINE}{text}\n{PROMPT}{typed}")
            else:
                self.out.write(text + "\n")
            self.out.flush()

    def read(self, stdin: TextIO) -> str | None:
        """One line of input, or None at end of input (Ctrl-D)."""
        with self.lock:
            self.prompting = True
        try:
            if self.interactive:
                try:
                    return input(PROMPT)
                except EOFError:
                    self.out.write("\n")
                    return None
            line = stdin.readline()
            return line.rstrip("\n") if line else None
        finally:
            with self.lock:
                self.prompting = False


@dataclass
class Chat:
    client: ApiClient
    session_id: str
    screen: Screen
    stop: threading.Event = field(default_factory=threading.Event)
    stream: EventStream | None = None
    stream_down: bool = False

    def start(self, history: int) -> None:
        """Banner, the session compression led to, recent history, then the live stream."""
        info = self.client.get_session(self.session_id)
        active = str(info.get("active_id") or self.session_id)
        if active != self.session_id:
            self.screen.say(f"Session {self.session_id} continues as {active} (compressed).")
            self.session_id = active
        self.screen.say(f"Chatting in session {self.session_id}. Ctrl-D (or Ctrl-C) leaves.")
        recent = self.client.history(self.session_id, last=history)
        if recent:
            self.screen.say(f"— the last {len(recent)} messages —")
        for message in recent:
            shown = render(message, live=False)
            if shown is not None:
                self.screen.say(shown)
        self.screen.say("— history ends; type a message or /heartbeat … —")
        self.stream = stream = EventStream(
            self.client,
            self.session_id,
            after=recent[-1].id if recent else 0,
            stop=self.stop,
            on_problem=self._stream_problem,
            on_connect=self._stream_back,
        )
        threading.Thread(target=self._follow, args=(stream,), name="events", daemon=True).start()

    def _stream_problem(self, sentence: str, _delay: float) -> None:
        if not self.stream_down:  # one sentence per outage, not one per retry
            self.screen.say(f"(live replies paused) {sentence}")
        self.stream_down = True

    def _stream_back(self) -> None:
        if self.stream_down:
            self.screen.say("(live replies back)")
        self.stream_down = False

    def _follow(self, stream: EventStream) -> None:
        # Ctrl-C is the main thread's: a SIGINT the kernel handed to this thread instead would
        # set Python's flag but leave the main thread asleep in readline until the next key.
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            for item in stream:
                if self.stop.is_set():
                    return
                if isinstance(item, Moved):
                    self._moved(item.moved_to)
                    continue
                shown = render(item, live=True)
                if shown is not None:
                    self.screen.say(shown)
        except ApiError as exc:
            self.screen.say(f"(live replies stopped) {exc}")
        except Exception as exc:  # the reader thread must never print a traceback over the chat
            self.screen.say(f"(live replies stopped) {type(exc).__name__}: {exc}")

    def _moved(self, child: str) -> None:
        if child != self.session_id:
            self.session_id = child
            self.screen.say(f"Session compressed: it continues as {child}; messages go there now.")

    def send(self, text: str) -> None:
        try:
            result = self.client.send(self.session_id, text)
        except (ApiError, ApiUnreachable) as exc:
            self.screen.say(f"Error: {exc}")
            return
        self._moved(result.session_id)
        if isinstance(result, CommandReply):
            self.screen.say(inert(result.reply) if result.ok else f"Error: {inert(result.reply)}")
        elif not result.handed_off and not result.duplicate:
            self.screen.say(f"(message {result.message_id} stored; it waits for a worker)")

    def loop(self, stdin: TextIO) -> None:
        try:
            while (line := self.screen.read(stdin)) is not None:
                if line.strip():
                    self.send(line)
        except KeyboardInterrupt:
            self.screen.say("")
        finally:
            if self.stream is not None:
                self.stream.close()
            self.stop.set()


def run_chat(
    client: ApiClient,
    session_id: str,
    *,
    history: int = 20,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
) -> int:
    """Chat until end of input or Ctrl-C; 0 then. Errors before the chat starts are raised."""
    stdin = stdin or sys.stdin
    out = out or sys.stdout
    interactive = stdin is sys.stdin and stdin.isatty() and out.isatty()
    if interactive:
        _ctrl_c_leaves()
    screen = Screen(out, interactive, _readline() if interactive else None)
    chat = Chat(client, session_id, screen)
    chat.start(history)
    chat.loop(stdin)
    screen.say("Bye.")
    return 0


def _ctrl_c_leaves() -> None:
    """The banner promises it: a shell that started us without job control (``cmd &`` in a
    script, a CI runner) leaves SIGINT ignored, and Python then installs no handler, so Ctrl-C
    in the chat's terminal did nothing."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
