"""Benchmarks: ``python -m bench quick|full`` (``make bench-quick``, ``make bench``).

Each benchmark is a module with ``NAME`` and ``run(ctx) -> dict``; the runner adds the machine,
the versions and the parameters, and writes ``bench/results/<name>-<UTC stamp>.json``. Nothing
here is asserted: the goals are compared in the report and in docs/benchmarks.md.
"""
