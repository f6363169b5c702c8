"""Schemathesis against the live API on loopback: no 5xx, no answer outside the OpenAPI schema.

Every operation is run with generated input, bounded per operation so the run stays short;
those naming a session run once more on a real session of the token's owner, and those naming
an owner on the token's own, so the answers of a session (and an owner) that exists are checked
too (not the event stream, which would never end).
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from support.api_fixtures import ALICE, TOKENS, Api

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
EXAMPLES = 25
HEADERS = {"Authorization": f"Bearer {TOKENS[ALICE]}"}


def exercise(strategy: st.SearchStrategy[Any]) -> None:
    @given(case=strategy)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        case.call_and_validate(headers=HEADERS, checks=CHECKS, timeout=10)

    run()


def test_the_api_keeps_its_schema(api: Api) -> None:
    schema = schemathesis.openapi.from_url(f"{api.url}/openapi.json")
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
    labels = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result.err()  # the schema itself is valid
        operation = result.ok()
        labels.append(operation.label)
        exercise(operation.as_strategy())
        if "{session_id}" in operation.path and not operation.path.endswith("/events"):
            exercise(operation.as_strategy(path_parameters={"session_id": sid}))
        if "{owner}" in operation.path:  # the token's own owner, as well as strangers
            exercise(operation.as_strategy(path_parameters={"owner": ALICE}))
    # 19, the session's webhook URL (2), /v1/cron (8), an owner's default budget (3)
    assert len(labels) == 32, labels
