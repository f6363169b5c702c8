"""Issue 29 (low): ``aaaaaaaaaaaaaaaa`` passed the length check as an API or admin token.

A token now needs at least ``MIN_DISTINCT_CHARS`` (8) different characters besides its 16 in
all; a weak one stops the API at start with a sentence naming which token (the pair's position,
or HBGW_ADMIN_TOKEN), never the token itself.
"""

from __future__ import annotations

import pytest

from hbgw.core.errors import BadInput
from hbgw.core.settings import Settings
from hbgw.gateway.api.auth import MIN_DISTINCT_CHARS, TokenTable, parse_tokens

STRONG = "Vq3-xT9_kP2mZr7w"
WEAK = ["aaaaaaaaaaaaaaaa", "abababababababab", "passwordpassword", "1234123412341234"]


@pytest.mark.parametrize("weak", WEAK)
def test_a_weak_owner_token_is_refused_by_its_position(weak: str) -> None:
    with pytest.raises(BadInput) as err:
        parse_tokens(f"alice:{STRONG},bob:{weak}")
    said = str(err.value)
    assert said.startswith("The token of HBGW_API_TOKENS pair 2 has only")
    assert f"at least {MIN_DISTINCT_CHARS} different characters" in said
    assert weak not in said and err.value.exit_code == 2


@pytest.mark.parametrize("weak", WEAK)
def test_a_weak_admin_token_stops_the_api_at_start(weak: str) -> None:
    settings = Settings(api_tokens=f"alice:{STRONG}", admin_token=weak)
    with pytest.raises(BadInput, match="The token of HBGW_ADMIN_TOKEN has only") as err:
        TokenTable.from_settings(settings)
    assert weak not in str(err.value)


def test_random_tokens_and_eight_different_characters_pass() -> None:
    assert parse_tokens(f"alice:{STRONG},bob:abcdefghabcdefgh") == [
        ("alice", STRONG),
        ("bob", "abcdefghabcdefgh"),
    ]
