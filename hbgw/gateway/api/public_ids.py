"""Message and run ids as the API shows them: a keyed permutation of SQL's sequential ids.

SQL numbers messages and runs across every session in one sequence, so the raw ids would let
any tenant gauge everyone's traffic (two of its own messages an hour apart tell how many were
sent meanwhile). The API shows ``1 + F(id)`` instead, where F is a four-round Feistel
network over 62 bits whose round function is keyed BLAKE2b (a MAC) under HBGW_API_ID_KEY: a
bijection, so every id has one public id and back, and without the key they look random. ``0`` stays
``0`` ("from the start" for ``after``). Public ids are not ordered; pages and streams are still
in message order, and ``after``/``before``/``Last-Event-ID`` take the public id of a message.
"""

from __future__ import annotations

import hashlib

from hbgw.core.errors import BadInput

HALF_BITS = 31
HALF_MASK = (1 << HALF_BITS) - 1
DOMAIN = 1 << (2 * HALF_BITS)
ROUNDS = 4
MAX_PUBLIC = DOMAIN  # 1 + F(x) for x in [0, 2**62)


class PublicIds:
    def __init__(self, key: bytes) -> None:
        self._key = key

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
        digest = hashlib.blake2b(data, key=self._key, digest_size=4).digest()
        return int.from_bytes(digest, "big") & HALF_MASK


def id_key(secret: str | None, database_url: str) -> bytes:
    """HBGW_API_ID_KEY, or (unset) a key derived from the database URL: the same on every
    replica, and secret where the URL carries a password. Changing it renumbers every id."""
    material = secret if secret else f"hbgw-public-ids:{database_url}"
    return hashlib.sha256(material.encode()).digest()
