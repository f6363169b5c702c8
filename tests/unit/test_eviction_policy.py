"""The eviction policy's rules (issue 29, finding 7), without a server: which policy a role
takes, the setting that accepts one, the sentence, and INFO's field when CONFIG is gone."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hbgw.core.settings import Settings
from hbgw.state.eviction import UNREADABLE, acceptable, policy_of_info, refusal


def test_only_noeviction_is_taken_without_the_setting() -> None:
    assert acceptable("noeviction", None)
    assert not acceptable("allkeys-lru", None)
    assert not acceptable(UNREADABLE, None)


def test_the_setting_accepts_the_policy_it_names_and_no_other() -> None:
    assert acceptable("allkeys-lru", "allkeys-lru")
    assert acceptable("noeviction", "allkeys-lru")  # the safe policy is always taken
    assert not acceptable("volatile-lru", "allkeys-lru")


def test_the_setting_names_a_policy_redis_has() -> None:
    with pytest.raises(ValidationError, match="names the maxmemory-policy to accept"):
        Settings(redis_accept_eviction="yes")
    assert Settings(redis_accept_eviction="allkeys-lfu").redis_accept_eviction == "allkeys-lfu"


def test_the_sentence_says_how_to_fix_it() -> None:
    sentence = refusal("allkeys-lru", "redis://h:6379/0", None)
    assert "redis-cli CONFIG SET maxmemory-policy noeviction" in sentence
    assert "parameter group" in sentence
    assert "HBGW_REDIS_ACCEPT_EVICTION=allkeys-lru" in sentence
    assert "accepts volatile-lru only" in refusal("allkeys-lru", "h", "volatile-lru")
    assert "CONFIG GET and INFO were both refused" in refusal(UNREADABLE, "h", None)


def test_info_memory_carries_the_policy() -> None:
    text = "# Memory\r\nused_memory:1000\r\nmaxmemory_policy:volatile-ttl\r\n"
    assert policy_of_info(text) == "volatile-ttl"
    assert policy_of_info({"maxmemory_policy": "allkeys-lru"}) == "allkeys-lru"
    assert policy_of_info("# Memory\r\nused_memory:1000\r\n") == UNREADABLE
