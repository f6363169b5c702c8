"""Bearer tokens: each belongs to an owner and reaches that owner's sessions; one admin token.

``HBGW_API_TOKENS`` is ``owner:token,owner2:token2``; ``HBGW_ADMIN_TOKEN`` reaches every
session. A token is compared with every configured one in constant time, and never logged.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from core.errors import BadInput
from core.settings import Settings
from sessions.validation import check_name

OWNER_CHARS = 255


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: an owner, or an operator (``admin``) who sees every session."""

    owner: str | None
    admin: bool = False

    def sees(self, session_owner: str | None) -> bool:
        return self.admin or (self.owner is not None and session_owner == self.owner)


def parse_tokens(text: str) -> list[tuple[str, str]]:
    """``owner:token`` pairs; a malformed pair is named by position, never by its token."""
    pairs: list[tuple[str, str]] = []
    for position, raw in enumerate(text.split(","), start=1):
        owner, sep, token = (part.strip() for part in raw.partition(":"))
        if not sep or not owner or not token:
            raise BadInput(
                f"HBGW_API_TOKENS pair {position} is not owner:token — write comma-separated "
                "owner:token pairs, like alice:TOKEN1,bob:TOKEN2."
            )
        check_name(owner, f"owner of HBGW_API_TOKENS pair {position}", OWNER_CHARS)
        if any(token == seen for _owner, seen in pairs):
            raise BadInput(
                f"HBGW_API_TOKENS pair {position} repeats the token of an earlier pair; "
                "give every owner a token of its own."
            )
        pairs.append((owner, token))
    return pairs


class TokenTable:
    def __init__(self, owners: list[tuple[str, str]], admin: str | None) -> None:
        self._entries = [(token.encode(), Principal(owner)) for owner, token in owners]
        if admin:
            self._entries.append((admin.encode(), Principal(None, admin=True)))

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenTable:
        tokens = settings.api_tokens.get_secret_value() if settings.api_tokens else ""
        admin = settings.admin_token.get_secret_value() if settings.admin_token else ""
        owners = parse_tokens(tokens) if tokens.strip() else []
        return cls(owners, admin.strip() or None)

    @property
    def empty(self) -> bool:
        return not self._entries

    def lookup(self, token: str) -> Principal | None:
        """The token's principal; every entry is compared, so timing tells nothing."""
        given = token.encode()
        found: Principal | None = None
        for secret, principal in self._entries:
            if hmac.compare_digest(given, secret):
                found = principal
        return found
