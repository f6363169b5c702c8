"""Bearer tokens: each belongs to an owner and reaches that owner's sessions; one admin token.

``HBGW_API_TOKENS`` is ``owner:token,owner2:token2``; ``HBGW_ADMIN_TOKEN`` reaches every
session. A token is compared with every configured one in constant time, and never logged.

Refused at start, each with a sentence that names the pair by position (never the token): a
token shorter than ``MIN_TOKEN_CHARS`` or with fewer than ``MIN_DISTINCT_CHARS`` different
characters (``aaaaaaaaaaaaaaaa`` is long and guessed at once), a character a bearer token
cannot carry (RFC 6750: letters, digits, ``-._~+/``, trailing ``=``), a token used twice, and
an admin token equal to an owner's (that owner would be the admin). The length rule also
catches most tokens split by a comma meant to be part of them: the pieces are short.
"""

from __future__ import annotations

import hmac
import string
from dataclasses import dataclass

from hbgw.core.errors import BadInput
from hbgw.core.metrics import CHAT_PLATFORMS
from hbgw.core.owner_chats import OwnerChats
from hbgw.core.settings import Settings
from hbgw.sessions.validation import check_name

OWNER_CHARS = 255
MIN_TOKEN_CHARS = 16
# A random token of 16 or more characters has far more (token_urlsafe(24): about 25 of 32); a
# typed or repeated one (aaaa…, abab…, passwordpassword) fewer. One in a hundred random
# 16-digit hex tokens has fewer too: the sentence asks for a longer one.
MIN_DISTINCT_CHARS = 8
GENERATE = "python -c 'import secrets; print(secrets.token_urlsafe(24))'"
# RFC 6750's b64token: what a client can send after "Bearer " (and "=" as trailing padding).
_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "-._~+/")


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: an owner, or an operator (``admin``) who sees every session."""

    owner: str | None
    admin: bool = False

    def sees(self, session_owner: str | None) -> bool:
        return self.admin or (self.owner is not None and session_owner == self.owner)


def chat_refusal(who: Principal, platform: str, chat: str, bindings: OwnerChats) -> str | None:
    """Why ``who`` may not open a session (or a cron route) on this chat; None when it may.

    A session on a chat platform posts into that chat as the bot: it is made by the platform's
    signed inbound (the person proved they are in the chat) or by an operator — the admin
    token, or HBGW_OWNER_CHATS binding the chat to this owner. An owner token alone makes
    sessions of the other platforms (``api``, ``cli``: delivered to the console or a file).
    """
    if who.admin or platform not in CHAT_PLATFORMS or bindings.binds(who.owner, platform, chat):
        return None
    return (
        f"Owner {who.owner} may not open a {platform} session on chat {chat}: a {platform} "
        f"session starts from a message in that chat, or an operator binds the chat to "
        f"{who.owner} in HBGW_OWNER_CHATS (or creates it with the admin token)."
    )


def webhook_refusal(who: Principal, url: str | None) -> str | None:
    """Why ``who`` may not leave a webhook session without a URL of its own; None when it may.

    A webhook session without one posts to HBGW_WEBHOOK_URL, signed with the operator's secret:
    the partner gateway there takes it as genuine. Only the signed inbound webhook (the partner
    itself) and the admin token make such sessions; an owner's go to the owner's URL.
    """
    if who.admin or url is not None:
        return None
    return (
        f"Owner {who.owner}'s webhook sessions post to a URL of their own, never to the "
        'operator\'s HBGW_WEBHOOK_URL: give "webhook_url" (PUT /v1/sessions/{id}/webhook '
        "changes it), or ask an operator to use the admin token."
    )


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
        check_token(token, f"HBGW_API_TOKENS pair {position}")
        if any(token == seen for _owner, seen in pairs):
            raise BadInput(
                f"HBGW_API_TOKENS pair {position} repeats the token of an earlier pair; "
                "give every owner a token of its own."
            )
        pairs.append((owner, token))
    return pairs


def check_token(token: str, what: str) -> None:
    """Long and varied enough to resist guessing, and sendable as ``Authorization: Bearer
    <token>``."""
    if len(token) < MIN_TOKEN_CHARS:
        raise BadInput(
            f"The token of {what} has {len(token)} characters; use at least {MIN_TOKEN_CHARS}, "
            f"for example from: {GENERATE}."
        )
    distinct = len(set(token))
    if distinct < MIN_DISTINCT_CHARS:
        raise BadInput(
            f"The token of {what} has only {distinct} different characters, which is easy to "
            f"guess; use a random token with at least {MIN_DISTINCT_CHARS} different characters, "
            f"for example from: {GENERATE}."
        )
    for position, char in enumerate(token, start=1):
        padding = char == "=" and not token[position:].strip("=")
        if char not in _TOKEN_CHARS and not padding:
            raise BadInput(
                f"The token of {what} has a character a bearer token cannot carry (at "
                f"{position}); use letters, digits and - . _ ~ + / (a comma separates pairs)."
            )


def check_admin_token(admin: str, owners: list[tuple[str, str]]) -> None:
    check_token(admin, "HBGW_ADMIN_TOKEN")
    for position, (_owner, token) in enumerate(owners, start=1):
        if hmac.compare_digest(admin.encode(), token.encode()):
            raise BadInput(
                f"HBGW_ADMIN_TOKEN is the token of HBGW_API_TOKENS pair {position}, which "
                "would make that owner an admin; give the admin a token of its own."
            )


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
        if admin.strip():
            check_admin_token(admin.strip(), owners)
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
