"""Issue 20, item 8 and issue 28, item 6: `hbgw stamp`'s quick Redis client
(``state.resp_quick``) against real servers, side by side with redis-py as the processes
connect it (``state.connection.connect``): given the same URL, settings and server, both reach
the same database or both refuse (a wrong password, a certificate nobody vouches for, checks
turned off); the stamp is the same bytes and the clock the same TIME. What it does not read is
left to redis-py."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from support.private_redis import running_redis
from support.tls_redis import PASSWORD, Impostor, Pki, make_pki, tls_redis_server

from hbgw.core.errors import BadInput
from hbgw.core.settings_quick import QuickSettings, RedisSettings
from hbgw.state.connection import connect
from hbgw.state.keys import Keys
from hbgw.state.liveness import Liveness, Stamp, stamp_command
from hbgw.state.resp_quick import NotQuick, QuickRedis, QuickRedisError, connect_quick

ROOT = Path(__file__).resolve().parents[2]


REFUSED = "refused"


def by_quick(url: str, settings: RedisSettings | None, *command: str) -> object:
    """``command``'s answer through the quick client, or ``REFUSED`` when it cannot connect
    (what ``gateway_ctx.state_redis`` turns into "no Redis answers")."""
    try:
        client = connect_quick(url, settings)
    except (OSError, QuickRedisError):
        return REFUSED
    try:
        return client.execute_command(*command)
    finally:
        client.close()


def by_redis_py(url: str, settings: RedisSettings | None, *command: str) -> object:
    """The same through redis-py as ``gateway_ctx.reachable_redis`` connects it."""
    client = connect(url, settings)
    try:
        client.ping()
        return client.execute_command(*command)  # type: ignore[no-untyped-call]
    except (redis.RedisError, OSError):
        return REFUSED
    finally:
        client.close()


def both(url: str, settings: RedisSettings | None, *command: str) -> object:
    quick = by_quick(url, settings, *command)
    assert quick == by_redis_py(url, settings, *command), url
    return quick


@pytest.fixture
def quick(redis_url: str) -> Iterator[QuickRedis]:
    client = connect_quick(redis_url, None)
    try:
        yield client
    finally:
        client.close()


def test_a_stamp_is_the_same_bytes_on_both_clients(
    quick: QuickRedis, redis_url: str, redis_client: redis.Redis, keys: Keys
) -> None:
    record = Stamp("s-é", 1_700_000_000_123, "tool:grep", "hook", external=True)
    Liveness(redis_client, keys).stamp(
        record.session, record.at_ms, record.phase, record.worker, external=True
    )
    raw = redis.Redis.from_url(redis_url)  # bytes as stored
    try:
        by_redis_py = raw.hget(keys.liveness(), record.session)
        redis_client.delete(keys.liveness())
        assert quick.send_all([stamp_command(keys, record)]) == [1]
        assert raw.hget(keys.liveness(), record.session) == by_redis_py
    finally:
        raw.close()
    assert Liveness(redis_client, keys).all() == [record]


def test_the_clock_is_redis_time(quick: QuickRedis, redis_client: redis.Redis) -> None:
    seconds, micros = quick.time()
    theirs = redis_client.time()
    assert abs(seconds + micros / 1e6 - (theirs[0] + theirs[1] / 1e6)) < 5


def test_password_acl_user_database_and_unix_socket_as_redis_py_reads_them() -> None:
    with tempfile.TemporaryDirectory(prefix="hbgw-q-") as short:  # a socket path is short
        sock = Path(short) / "r.sock"
        config = ("--unixsocket", str(sock), "--user", "alice", "on", ">alice-pw", "~*", "+@all")
        with running_redis(Path(short) / "data", *config) as server:
            admin = server.client()
            try:
                admin.config_set("requirepass", "the-pw")
                admin.auth("the-pw")
                admin.select(3)
                admin.set("where", "db3")
                admin.select(0)
                admin.set("where", "db0")
            finally:
                admin.close()
            port = server.port
            for url, found in (
                (f"redis://:the-pw@127.0.0.1:{port}/3", "db3"),
                (f"redis://alice:alice-pw@127.0.0.1:{port}/3", "db3"),
                (f"redis://:the-pw@127.0.0.1:{port}/0?db=3", "db3"),
                (f"redis://:the-pw@localhost:{port}", "db0"),
                (f"unix://:the-pw@{sock}?db=3", "db3"),
                (f"unix://:the-pw@{sock}", "db0"),
                (f"redis://:wrong@127.0.0.1:{port}/0", REFUSED),
                (f"redis://alice:wrong@127.0.0.1:{port}/0", REFUSED),
                (f"redis://127.0.0.1:{port}/0", REFUSED),  # no password
            ):
                assert both(url, None, "GET", "where") == found, url
            with pytest.raises(QuickRedisError, match=r"WRONGPASS|invalid"):
                connect_quick(f"redis://:wrong@127.0.0.1:{port}/0", None)
            with pytest.raises(QuickRedisError, match="NOAUTH"):
                connect_quick(f"redis://127.0.0.1:{port}/0", None)


def test_what_it_does_not_read_is_left_to_redis_py() -> None:
    for url in (
        "redis+cluster://127.0.0.1:7000",
        "rediss+cluster://127.0.0.1:7000",
        "sentinel://127.0.0.1:26379/mymaster",
        "REDIS://127.0.0.1:6379/0",  # redis-py refuses it, in its own words
        "redis://127.0.0.1:6379/0?socket_timeout=1",
        "redis://127.0.0.1:6379/?db=x",
    ):
        with pytest.raises(NotQuick):
            connect_quick(url, None)


def test_nobody_listening_is_refused_by_both() -> None:
    from support.tls_redis import free_port

    url = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(OSError):
        connect_quick(url, None)
    assert both(url, None, "ECHO", "hi") == REFUSED


# -- TLS -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("quick-pki"), "quick")


@pytest.fixture(scope="module")
def tls_url(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with tls_redis_server(tmp_path_factory.mktemp("quick-tls"), pki) as url:
        yield url


def test_tls_verifies_as_redis_py_does(tls_url: str, pki: Pki, tmp_path: Path) -> None:
    settings = QuickSettings(home=tmp_path, redis_tls_ca=pki.ca)
    assert both(tls_url, settings, "ECHO", "hi") == "hi"  # against HBGW_REDIS_TLS_CA
    in_url = f"{tls_url}?ssl_ca_certs={pki.ca}&ssl_cert_reqs=required"
    assert both(in_url, None, "ECHO", "hi") == "hi"
    # The system's CAs do not know it: both refuse.
    assert both(tls_url, QuickSettings(home=tmp_path), "ECHO", "hi") == REFUSED
    with pytest.raises(ssl.SSLCertVerificationError):
        connect_quick(tls_url, QuickSettings(home=tmp_path))
    off = f"{tls_url}?ssl_cert_reqs=none"
    with pytest.raises(BadInput, match="turns certificate checks off") as quick:
        connect_quick(off, settings)
    with pytest.raises(BadInput) as full:
        connect(off, settings)
    assert str(quick.value) == str(full.value)


def test_an_impostor_gets_nothing_not_even_auth(tmp_path: Path, pki: Pki) -> None:
    other = make_pki(tmp_path / "other", "impostor")
    with Impostor(other) as impostor, pytest.raises(ssl.SSLCertVerificationError):
        connect_quick(impostor.url(), QuickSettings(home=tmp_path, redis_tls_ca=pki.ca))
    assert PASSWORD.encode() not in impostor.received and impostor.received == b""


def test_hbgw_stamp_into_a_tls_redis_imports_no_redis_py(
    tls_url: str, pki: Pki, tmp_path: Path
) -> None:
    env = {
        "HBGW_HOME": str(tmp_path),
        "HBGW_REDIS_URL": tls_url,
        "HBGW_REDIS_TLS_CA": str(pki.ca),
        "HBGW_NAMESPACE": "quick-tls",
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
    }
    argv = [sys.executable, "-X", "importtime", "-m", "hbgw", "stamp", "--session", "t", "idle"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 0 and "(Redis namespace quick-tls)" in done.stdout, done.stderr
    assert "redis" not in {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in
                           done.stderr.splitlines() if "|" in line}  # fmt: skip
    client = redis.Redis.from_url(tls_url, ssl_ca_certs=str(pki.ca), decode_responses=True)
    try:
        stored = json.loads(client.hget(Keys("quick-tls").liveness(), "t") or "{}")
    finally:
        client.close()
    assert (stored["phase"], stored["external"]) == ("idle", True)
