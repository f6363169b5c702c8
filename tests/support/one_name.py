"""The project installs one import name, ``hbgw`` (issue 20): the layer folders at the top of the
repository (``workers``, ``beat``, ``sessions``) are reached as ``hbgw.workers``, ... through
hbgw/'s links. The repository root is on the tests' path (for ``chaos`` and ``bench``), so
``import workers`` would still work here and load a second copy of every module; the wheel has
no ``workers``. This finder makes the old
names fail in the test process as they would on a server."""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

# core, state and gateway live in hbgw/ itself; the other three stay at the top, linked in.
LINKED = frozenset({"sessions", "beat", "workers"})
LAYERS = LINKED | {"core", "state", "gateway"}


class _OldNames(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if path is None and fullname in LAYERS:
            raise ImportError(f"import hbgw.{fullname}, not {fullname}: the wheel has only hbgw")
        return None


def forbid_old_names() -> None:
    if not any(isinstance(f, _OldNames) for f in sys.meta_path):
        sys.meta_path.insert(0, _OldNames())
