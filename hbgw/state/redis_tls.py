"""TLS to Redis (``rediss://``): the server's certificate is verified on every connection.

Two clients talk to Redis: redis-py (the gateway's own state) and kombu (Celery's broker, which
beat, the workers, the API and Flower all use). redis-py verifies a ``rediss://`` server by
default; kombu does not: given a bare ``rediss://`` URL it connects with ``CERT_NONE`` and sends
``AUTH`` with the password to whoever answers. Both get their options from here, so both verify
against the same CA (``HBGW_REDIS_TLS_CA``, else the system's) and present the same client
certificate (``HBGW_REDIS_TLS_CERT`` and ``HBGW_REDIS_TLS_KEY``) when one is set.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from hbgw.core.errors import BadInput, HbgwError
from hbgw.core.masking import mask_url
from hbgw.core.settings_quick import RedisSettings

TLS_SCHEMES = ("rediss", "rediss+cluster")
# What the TLS layer says when the peer's certificate does not verify (OpenSSL's reason codes).
_CERTIFICATE_FAILURES = ("CERTIFICATE_VERIFY_FAILED", "certificate verify failed")


class RedisTlsError(HbgwError):
    """Redis's TLS certificate did not verify: the connection was refused before AUTH."""


def uses_tls(url: str) -> bool:
    return urlsplit(url).scheme.lower() in TLS_SCHEMES


def tls_options(settings: RedisSettings | None, url: str) -> dict[str, Any]:
    """SSL keyword arguments for redis-py and for Celery's ``broker_use_ssl`` (same names)."""
    _refuse_unverified_url(url)
    options: dict[str, Any] = {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_check_hostname": True}
    if settings is None:
        return options
    files = {
        "ssl_ca_certs": ("HBGW_REDIS_TLS_CA", settings.redis_tls_ca),
        "ssl_certfile": ("HBGW_REDIS_TLS_CERT", settings.redis_tls_cert),
        "ssl_keyfile": ("HBGW_REDIS_TLS_KEY", settings.redis_tls_key),
    }
    for option, (variable, path) in files.items():
        if path is not None:
            options[option] = str(_readable(variable, path))
    return options


def _readable(variable: str, path: Path) -> Path:
    if not path.is_file():
        raise BadInput(f"{variable}={path} is not a readable file: give the path of a PEM file.")
    return path


def _refuse_unverified_url(url: str) -> None:
    # redis-py lets URL options override its keyword arguments: a `?ssl_cert_reqs=none` would
    # quietly switch verification off again.
    wanted = parse_qs(urlsplit(url).query).get("ssl_cert_reqs", ["required"])
    if any(value.lower() not in ("required", "cert_required") for value in wanted):
        raise BadInput(
            f"HBGW_REDIS_URL {mask_url(url)} turns certificate checks off (ssl_cert_reqs); the "
            "gateway always verifies Redis's certificate: remove the option and set "
            "HBGW_REDIS_TLS_CA to the CA that signed the server's certificate."
        )


def is_certificate_failure(exc: BaseException) -> bool:
    """True when ``exc`` (or what caused it) is a failed certificate check."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        # redis-py rewraps the ssl error in its own ConnectionError, keeping only the text.
        if any(marker in str(seen) for marker in _CERTIFICATE_FAILURES):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def certificate_refused(
    url: str, settings: RedisSettings | None, exc: BaseException
) -> RedisTlsError:
    ca = settings.redis_tls_ca if settings else None
    against = f"the CA in HBGW_REDIS_TLS_CA ({ca})" if ca else "the system's CAs"
    return RedisTlsError(
        f"Refusing Redis at {mask_url(url)}: its TLS certificate does not verify against "
        f"{against} ({' '.join(str(exc).split())}); nothing was sent to it. Set "
        "HBGW_REDIS_TLS_CA to the CA that signed the server's certificate, or check that the "
        "URL names the right server."
    )
