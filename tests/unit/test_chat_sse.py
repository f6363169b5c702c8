"""The events-stream parser of `hbgw chat`, line by line as the HTML standard defines it."""

from __future__ import annotations

from hbgw.chat.events import Backoff
from hbgw.chat.sse import SseEvent, SseParser, parse


def events(text: str) -> list[SseEvent]:
    return list(parse(text.split("\n")))


def test_a_message_event_with_id_event_and_data() -> None:
    got = events('id: 7\nevent: message\ndata: {"id": 7}\n\n')
    assert got == [SseEvent(event="message", data='{"id": 7}', id="7")]


def test_data_lines_join_with_newlines_and_one_leading_space_is_dropped() -> None:
    got = events("data: first\ndata:second\ndata:  third\ndata\n\n")
    assert got == [SseEvent(event="message", data="first\nsecond\n third\n", id=None)]


def test_comments_and_keep_alives_dispatch_nothing() -> None:
    assert events(": keep-alive\n\n: another\n\n") == []


def test_an_event_without_data_is_not_dispatched_and_does_not_leak_its_type() -> None:
    got = events("event: session\n\ndata: x\n\n")
    assert got == [SseEvent(event="message", data="x", id=None)]


def test_the_last_id_persists_and_an_empty_id_resets_it() -> None:
    got = events("id: 3\ndata: a\n\ndata: b\n\nid\ndata: c\n\n")
    assert [e.id for e in got] == ["3", "3", None]


def test_an_id_with_a_nul_is_ignored() -> None:
    assert events("id: 4\n\nid: 5\0\ndata: a\n\n")[0].id == "4"


def test_crlf_and_cr_end_lines_but_u2028_inside_data_does_not() -> None:
    raw = ["id: 1\r\n", "data: a\u2028b\r", "\r\n"]
    assert list(parse(raw)) == [SseEvent(event="message", data="a\u2028b", id="1")]


def test_an_unterminated_last_event_is_dropped() -> None:
    assert events("data: complete\n\ndata: cut off") == [
        SseEvent(event="message", data="complete", id=None)
    ]


def test_retry_and_unknown_fields() -> None:
    parser = SseParser()
    assert list(parse(["retry: 1500", "retry: soon", "colour: red", "data: x", ""], parser)) == [
        SseEvent(event="message", data="x", id=None)
    ]
    assert parser.retry_ms == 1500


def test_the_parser_resumes_from_a_known_id() -> None:
    assert events("data: x\n\n")[0].id is None
    assert next(parse(["data: x", ""], SseParser(last_id="41"))).id == "41"


def test_backoff_doubles_up_to_its_cap_and_resets() -> None:
    backoff = Backoff(first=0.5, cap=4.0)
    assert [backoff.next() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    backoff.reset()
    assert backoff.next() == 0.5
