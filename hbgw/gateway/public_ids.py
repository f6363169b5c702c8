"""Message and run ids as the API shows them: a keyed permutation of SQL's sequential ids.

SQL numbers messages and runs across every session in one sequence, so the raw ids would let
any tenant gauge everyone's traffic (two of its own messages an hour apart tell how many were
sent meanwhile). The API shows ``1 + F(id)`` instead, where F is a four-round Feistel
network over 62 bits whose round function is keyed BLAKE2b (a MAC) under HBGW_API_ID_KEY: a
bijection, so every id has one public id and back, and without the key they look random. ``0`` stays
``0`` ("from the start" for ``after``). Public ids are not ordered; pages and streams are still
in message order, and ``after``/``before``/``Last-Event-ID`` take the public id of a message.

Every edge shows the same ids: the API, and the signed webhooks' ``reply_to`` and
``Idempotency-Key`` (``platforms/webhook/channel.py``). The key is HBGW_API_ID_KEY, or, unset,
one the deployment made at random and keeps in SQL (``store.secrets``), read by every replica:
never one a person could compute from the database URL. It is read on first use, not at
start, so an API starts while its database is away.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable

from hbgw.core.clock import utcnow
from hbgw.core.errors import BadInput
from hbgw.core.settings import Settings
from hbgw.sessions.store import Store, StoredSecrets

HALF_BITS = 31
HALF_MASK = (1 << HALF_BITS) - 1
DOMAIN = 1 << (2 * HALF_BITS)
ROUNDS = 4
MAX_PUBLIC = DOMAIN  # 1 + F(x) for x in [0, 2**62)
STORED_KEY = "public_id_key"  # its name among the stored secrets


class PublicIds:
    def __init__(self, key: Callable[[], bytes]) -> None:
        """``key``: called once, at the first id shown or read (a store error then is the
        caller's, and the next call asks again)."""
        self._source = key
        self._key: bytes | None = None
        self._lock = threading.Lock()

    def show(self, internal: int | None) -> int | None:
        if internal is None or internal == 0:
            return internal
        left, right = internal >> HALF_BITS, internal & HALF_MASK
        for number in range(ROUNDS):
            left, right = right, left ^ self._round(number, right)
        return 1 + ((left << HALF_BITS) | right)

    def read(self, public: int, what: str = "id") -> int:
        """The SQL id of a public id; one the API cannot have given is a BadInput."""
        if public == 0:
            return 0
        if not 0 < public <= MAX_PUBLIC:
            raise BadInput(f"{public} is not a {what} this API gave out; use one it answered.")
        value = public - 1
        left, right = value >> HALF_BITS, value & HALF_MASK
        for number in reversed(range(ROUNDS)):
            left, right = right ^ self._round(number, left), left
        return (left << HALF_BITS) | right

    def _round(self, number: int, half: int) -> int:
        data = bytes([number]) + half.to_bytes(4, "big")
        digest = hashlib.blake2b(data, key=self._loaded(), digest_size=4).digest()
        return int.from_bytes(digest, "big") & HALF_MASK

    def _loaded(self) -> bytes:
        if self._key is None:
            with self._lock:
                if self._key is None:
                    self._key = self._source()
        return self._key


def id_key(secret: str) -> bytes:
    """The Feistel key of a secret (HBGW_API_ID_KEY, or the stored one). Changing the secret
    renumbers every id."""
    return hashlib.sha256(secret.encode()).digest()


def deployment_ids(settings: Settings, secrets: StoredSecrets | None = None) -> PublicIds:
    """The deployment's public ids: keyed by HBGW_API_ID_KEY, else by the secret stored in SQL
    (``secrets``: a process's store part; None opens the settings' database when first needed,
    for a channel built on its own)."""
    if settings.api_id_key is not None:
        configured = id_key(settings.api_id_key.get_secret_value())
        return PublicIds(lambda: configured)

    def stored() -> bytes:
        store_secrets = secrets or Store.from_url(settings.effective_database_url).secrets
        return id_key(store_secrets.stored_secret(STORED_KEY, utcnow()))

    return PublicIds(stored)
