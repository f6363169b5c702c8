"""A program run in a pseudo-terminal, driven like a person at a keyboard; output is polled."""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
import termios
from collections.abc import Iterator
from contextlib import contextmanager

from support.harness import wait_until

CTRL_C = "\x03"
CTRL_D = "\x04"


class Terminal:
    def __init__(self, proc: subprocess.Popen[bytes], master: int) -> None:
        self.proc = proc
        self.master = master
        self.seen = ""
        self.mark = 0

    def _pump(self) -> None:
        while select.select([self.master], [], [], 0.05)[0]:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: the program closed its end of the terminal
                return
            if not chunk:
                return
            self.seen += chunk.decode("utf-8", "replace")

    def expect(self, text: str, timeout: float = 20.0) -> str:
        """Wait for ``text`` after the last match; return everything up to and including it."""

        def found() -> bool:
            self._pump()
            return self.seen.find(text, self.mark) >= 0

        try:
            wait_until(found, timeout, repr(text))
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the terminal showed:\n{self.seen}") from None
        end = self.seen.index(text, self.mark) + len(text)
        before, self.mark = self.seen[self.mark : end], end
        return before

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def wait(self, timeout: float = 20.0) -> int:
        def exited() -> bool:
            self._pump()
            return self.proc.poll() is not None

        wait_until(exited, timeout, "the program to exit")
        self._pump()
        return int(self.proc.returncode)


def _take_terminal() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@contextmanager
def in_terminal(argv: list[str], env: dict[str, str]) -> Iterator[Terminal]:
    """Run ``argv`` on a terminal (stdin, stdout, stderr); killed by its pid if still running."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
        # As a login shell's child: the terminal is its controlling one, so Ctrl-C is SIGINT.
        preexec_fn=_take_terminal,
    )
    os.close(slave)
    try:
        yield Terminal(proc, master)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        os.close(master)
