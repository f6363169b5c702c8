#!/bin/sh
# A command agent that tries every way to read its worker's secrets and answers with what it
# read (tests/e2e/test_agent_isolation.py). $1: the worker's HBGW_HOME.
cat >/dev/null
worker=$PPID
probe() {
echo "probe uid=$(id -u)"
echo "--- own environment"; env
echo "--- worker environ"; tr '\0' '\n' < /proc/$worker/environ 2>&1
echo "--- worker cmdline"; tr '\0' ' ' < /proc/$worker/cmdline 2>&1; echo
echo "--- worker fds"; ls -l /proc/$worker/fd 2>&1
echo "--- own fds"; ls -l /proc/self/fd 2>&1
echo "--- HBGW_HOME files"
for name in api.json redis/password worker.log hbgw.sqlite3; do cat "$1/$name" 2>&1; done
find "$1" -type f -exec cat {} + 2>&1
echo "--- worker memory"
/usr/bin/python3 -I - "$worker" <<'PY' 2>&1
import re, sys
pid = sys.argv[1]
found = set()
try:
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("rw"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                chunk = mem.read(end - start)
            except (OSError, ValueError, OverflowError):
                continue
            found.update(re.findall(rb"[\w:.-]*xyzzy[\w:.-]*", chunk))
    print("memory read:", sorted(v.decode(errors="replace") for v in found)[:50])
except OSError as exc:
    print("memory refused:", exc)
PY
echo "--- end"
}
# Printable ASCII only: the reply must decode as text even with a database file in it.
probe "$1" 2>&1 | tr -cd '\11\12\40-\176'
