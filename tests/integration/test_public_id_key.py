"""The key of the public ids: HBGW_API_ID_KEY, else one the deployment made at random and keeps
in SQL, the same for every replica — never one computable from the database URL.

Pins issue 29 (low): with HBGW_API_ID_KEY unset the key was derived from the database URL, so
with a password-less URL (``postgresql://hbgw@db/hbgw``) anyone could turn the API's public
ids back into SQL's sequential ones."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session
from support.api_fixtures import ALICE, Api, api_overrides
from support.harness import gateway_settings
from support.http_server import serving

from hbgw.core.clock import utcnow
from hbgw.core.settings import Settings
from hbgw.gateway.api.app import create_app
from hbgw.gateway.public_ids import STORED_KEY, PublicIds, deployment_ids, id_key
from hbgw.sessions.models import StoredSecretRow
from hbgw.sessions.store import Store

REPLICAS = 6


def _first_message_id(settings: Settings, redis_url: str) -> int:
    """The public id an API on ``settings`` gives the first message of a fresh database."""
    with serving(create_app(settings, redis_url=redis_url)) as url:
        api = Api(url, None)  # type: ignore[arg-type]  # no deployment behind: no workers
        with api.owner(ALICE) as alice:
            made = alice.post("/v1/sessions", json={"platform": "cli", "chat": "me"})
            assert made.status_code == 201, made.text
            sent = alice.post(f"/v1/sessions/{made.json()['id']}/messages", json={"text": "hi"})
    assert sent.status_code == 202, sent.text
    message_id: int = sent.json()["message_id"]
    return message_id


def test_the_same_database_url_gives_different_ids_in_two_deployments(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    settings = gateway_settings(tmp_path, redis_url, redis_ns, **api_overrides())
    database = Path(settings.effective_database_url.removeprefix("sqlite:///"))
    first = _first_message_id(settings, redis_url)
    database.unlink()  # a second deployment under the very same URL, from nothing
    second = _first_message_id(settings, redis_url)
    assert first != second  # the same SQL id (the first message) under two stored keys
    # The old key, derived from the URL, computes neither.
    url = settings.effective_database_url
    from_url = hashlib.sha256(f"hbgw-public-ids:{url}".encode()).digest()
    guessed = PublicIds(lambda: from_url).show(1)
    assert guessed not in (first, second)


def test_replicas_racing_to_make_the_key_all_read_the_one_made(
    db_url: str, migrated_engine: Engine
) -> None:
    stores = [Store.from_url(db_url) for _ in range(REPLICAS)]
    start = threading.Barrier(REPLICAS)
    read: list[str] = []

    def replica(store: Store) -> None:
        start.wait(10)
        read.append(store.secrets.stored_secret(STORED_KEY, utcnow()))

    threads = [threading.Thread(target=replica, args=(store,)) for store in stores]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert len(read) == REPLICAS and len(set(read)) == 1
        [key] = set(read)
        assert len(key) == 64 and int(key, 16) >= 0  # 256 random bits, in hex
        with Session(stores[0].engine) as db:
            assert db.scalar(select(func.count()).select_from(StoredSecretRow)) == 1
        # Every replica's ids, built the way the API and the workers build them, agree.
        settings = Settings(database_url=db_url)
        shown = {deployment_ids(settings, store.secrets).show(7) for store in stores}
        assert shown == {PublicIds(lambda: id_key(key)).show(7)}
    finally:
        for store in stores:
            store.close()


def test_a_configured_key_is_used_and_nothing_is_stored(sqlite_url: str) -> None:
    settings = Settings(database_url=sqlite_url, api_id_key="operator-chosen-key")
    store = Store.from_url(sqlite_url)
    try:
        ids = deployment_ids(settings, store.secrets)
        assert ids.show(7) == PublicIds(lambda: id_key("operator-chosen-key")).show(7)
        assert ids.read(ids.show(7) or 0) == 7
        with Session(store.engine) as db:
            assert db.scalar(select(func.count()).select_from(StoredSecretRow)) == 0
    finally:
        store.close()
