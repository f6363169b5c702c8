"""What is secret in a URL or a command line, found by one rule and starred for display.

A value is secret when its *name* says so: the name contains one of ``SECRET_WORDS``
(``password``, ``token``, ``api_key``, ``client_secret``, ``auth``…). In a URL that is the
password of its userinfo (``user:PASSWORD@host``) and every query parameter so named
(``?token=…``, ``&api_key=…``); in a command line (``HBGW_AGENT_COMMAND``) it is the value of an
option so named (``--token X``, ``--api-key=X``), of an assignment so named (``API_KEY=X``), and
whatever a URL in it holds. Values are starred, names stay: the line still says what it was.
"""

from __future__ import annotations

import re
import shlex
from urllib.parse import parse_qsl, unquote, urlsplit

STARS = "********"
SECRET_WORDS = ("pass", "pwd", "token", "key", "secret", "auth", "credential", "signature")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*)=(.*)", re.DOTALL)
_OPTION = re.compile(r"(--?[A-Za-z0-9][A-Za-z0-9_.-]*)(?:=(.*))?", re.DOTALL)


def secret_name(name: str) -> bool:
    """Whether a parameter, option or variable named ``name`` holds a secret."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS)


def mask_url(url: str) -> str:
    """``url`` with its userinfo password and its secret query values starred."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    before, mark, query = rest.partition("?")
    if "@" in before:
        # The last @ before the query: a password may itself hold @ or /.
        creds, _, host = before.rpartition("@")
        user, colon, password = creds.partition(":")
        if colon and password:  # an empty password is not a secret to star (issue 20)
            before = f"{user}:{STARS}@{host}"
    if query:
        query, hash_mark, fragment = query.partition("#")
        query = "&".join(_mask_pair(pair) for pair in query.split("&")) + hash_mark + fragment
    return f"{scheme}://{before}{mark}{query}"


def mask_webhook_url(url: str) -> str:
    """``url`` with everything after its host starred: a webhook's token is often its path
    (``https://hooks.example/p/T0/B0/XXXX``), whatever its parameters are called."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return STARS
    host = parts.netloc.rpartition("@")[2]
    if parts.password:
        host = f"{parts.username or ''}:{STARS}@{host}"
    carries = len(parts.path) > 1 or parts.query  # "/" alone carries nothing
    path = f"/{STARS}" if carries else parts.path
    return f"{parts.scheme}://{host}{path}"


def _mask_pair(pair: str) -> str:
    name, eq, _ = pair.partition("=")
    return f"{name}={STARS}" if eq and secret_name(unquote(name)) else pair


def url_secrets(url: str) -> list[str]:
    """The secret values inside ``url``, as written and decoded (logs star them anywhere)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = [parts.password] if parts.password else []
    found += [value for name, value in parse_qsl(parts.query) if secret_name(name)]
    return _both_spellings(found)


def mask_command(command: str) -> str:
    """``command`` for display, with every secret it carries starred (see the module)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return STARS  # unbalanced quotes: no telling what is what, show nothing of it
    shown, hide_next = [], False
    for word in words:
        shown.append(STARS if hide_next else _mask_word(word))
        hide_next = not hide_next and _secret_option_without_value(word)
    return " ".join(_quoted(word) for word in shown)


def command_secrets(command: str) -> list[str]:
    """The secret values inside ``command`` (logs star them anywhere)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return []
    found: list[str] = []
    for before, word in zip(["", *words], words, strict=False):
        if _secret_option_without_value(before):
            found.append(word)
            continue
        match = _ASSIGNMENT.fullmatch(word.lstrip("-"))
        if match and secret_name(match.group(1)):
            found.append(match.group(2))
        if "://" in word:
            found += url_secrets(word)
    return _both_spellings(found)


def _quoted(word: str) -> str:
    # Stars are shown bare: they are a placeholder, not shell text to protect.
    plain = word.replace(STARS, "X")
    return word if shlex.quote(plain) == plain else shlex.quote(word)


def _mask_word(word: str) -> str:
    if word.startswith("-"):
        option = _OPTION.fullmatch(word)
        if option and option.group(2) is not None and secret_name(option.group(1)):
            return f"{option.group(1)}={STARS}"
    else:
        assignment = _ASSIGNMENT.fullmatch(word)
        if assignment and secret_name(assignment.group(1)):
            return f"{assignment.group(1)}={STARS}"
    return mask_url(word) if "://" in word else word


def _secret_option_without_value(word: str) -> bool:
    option = _OPTION.fullmatch(word)
    return bool(option and option.group(2) is None and secret_name(option.group(1)))


def _both_spellings(values: list[str]) -> list[str]:
    out: list[str] = []
    for value in values:
        for spelling in (value, unquote(value)):
            if spelling and spelling not in out:
                out.append(spelling)
    return out
