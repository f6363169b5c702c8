"""A command agent for tests: behaviour is chosen by words in the turn text."""

import os
import sys
import time
from pathlib import Path

text = sys.stdin.read()
kind = os.environ.get("HBGW_TURN_KIND", "?")
if "HOLD " in text:
    # Blocks until the test creates the file named after HOLD: a turn held mid-agent.
    gate = Path(text.split("HOLD ", 1)[1].split()[0])
    deadline = time.monotonic() + 60
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
if "SLOW" in text:
    time.sleep(float(os.environ.get("TEST_AGENT_SLOW", "1.5")))
if "FAIL" in text:
    print("the tool exploded", file=sys.stderr)
    sys.exit(3)
if "QUIET" in text:
    print("  [silent] ")
    sys.exit(0)
if "SAY: " in text:
    # Answers exactly the rest of that line, with \n as a line break (the completion marker).
    print(text.split("SAY: ", 1)[1].splitlines()[0].replace("\\n", "\n"))
    sys.exit(0)
first = text.strip().splitlines()[0] if text.strip() else ""
print(f"{kind} reply to: {first}")
