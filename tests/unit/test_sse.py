"""The SSE door (runtime.coordinator.sse): who may ask, what a request may ask, and frames a client parses back."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ouroactors.runtime.coordinator.sse import Refusal, StreamRequest, end_frame, event_frame, parse

TOKEN = "t" * 43
AUTH = {"authorization": f"Bearer {TOKEN}"}


def test_a_request_with_the_token_names_a_session_and_where_to_resume():
    assert parse("GET", "/sessions/s1/events", AUTH, TOKEN) == StreamRequest("s1", 0)
    assert parse("GET", f"/sessions/a.b:c@d-1/events?after=7&until=turn_settled&access_token={TOKEN}", {},
                 TOKEN) == StreamRequest("a.b:c@d-1", 7, "turn_settled")
    # a reconnecting EventSource sends the last id it received: it wins over the query it reconnects with
    assert parse("GET", "/sessions/s1/events?after=2", {**AUTH, "last-event-id": "41"}, TOKEN).after == 41
    assert parse("GET", "/sessions/s1/events?after=2", {**AUTH, "last-event-id": ""}, TOKEN).after == 2


@pytest.mark.parametrize("headers,target", [
    ({}, "/sessions/s1/events"),
    ({"authorization": "Bearer wrong"}, "/sessions/s1/events"),
    ({"authorization": f"Basic {TOKEN}"}, "/sessions/s1/events"),
    ({}, "/sessions/s1/events?access_token="),
    ({}, f"/sessions/s1/events?access_token={TOKEN[:-1]}"),
    ({"authorization": "Bearer wrong"}, f"/sessions/s1/events?access_token={TOKEN}"),  # a wrong header wins
    ({"authorization": "Bearer \udcff"}, "/sessions/s1/events"),
])
def test_no_token_or_a_wrong_one_is_401_before_anything_else_is_looked_at(headers, target):
    refused = parse("GET", target, headers, TOKEN)
    assert isinstance(refused, Refusal) and refused.status == 401
    assert parse("GET", "/no/such/path", {}, TOKEN) == refused  # (an unknown path tells nothing without it)


@pytest.mark.parametrize("method,target,headers,status,named", [
    ("POST", "/sessions/s1/events", AUTH, 405, "only GET"),
    ("GET", "/sessions/s1", AUTH, 404, "/sessions/<session id>/events"),
    ("GET", "/sessions/s1/events/x", AUTH, 404, "not found"),
    ("GET", "/sessions/%2E%2E%2Fetc/events", AUTH, 400, "is not a session id"),
    ("GET", "/sessions/..%2Fetc/events", AUTH, 400, "is not a session id"),
    ("GET", "/sessions/" + "s" * 129 + "/events", AUTH, 400, "is not a session id"),
    ("GET", "/sessions/-s/events", AUTH, 400, "starting with a letter or digit"),
    ("GET", "/sessions/s1/events?after=-1", AUTH, 400, "after must be a cursor"),
    ("GET", "/sessions/s1/events?after=1e3", AUTH, 400, "after must be a cursor"),
    ("GET", "/sessions/s1/events?after=" + "9" * 20, AUTH, 400, "after must be a cursor"),
    ("GET", "/sessions/s1/events?after=%D9%A3", AUTH, 400, "after must be a cursor"),  # an Arabic-Indic digit
    ("GET", "/sessions/s1/events?after=1&after=2", AUTH, 400, "given 2 times"),
    ("GET", "/sessions/s1/events?until=Turn%0Asettled", AUTH, 400, "until must be an event kind"),
    ("GET", "/sessions/s1/events", {**AUTH, "last-event-id": "x"}, 400, "Last-Event-ID must be a cursor"),
    ("GET", "/sessions/s1/events?a&b&c&d&e&f&g&h&i", AUTH, 400, "does not parse"),
])
def test_every_bad_field_is_refused_naming_it(method, target, headers, status, named):
    refused = parse(method, target, headers, TOKEN)
    assert isinstance(refused, Refusal) and refused.status == status and named in refused.reason, refused


def test_an_event_is_one_frame_whose_id_is_its_cursor():
    frame = event_frame(12, "text", 3, {"text": "two\nlines\r\n\nand a blank one"}, generation=9)
    text = frame.decode()
    assert text.startswith("id: 12\nevent: text\ndata: {") and text.endswith("}\n\n") and text.count("\n\n") == 1
    assert json.loads(text.split("data: ", 1)[1]) == {"cursor": 12, "kind": "text", "turn": 3, "generation": 9,
                                                      "committed_ns": 0,
                                                      "data": {"text": "two\nlines\r\n\nand a blank one"}}
    odd = event_frame(1, "Odd\nkind: x", 1, {}).decode()  # a kind never ends the frame early
    assert odd.splitlines()[1] == "event: odd_kind__x" and odd.count("\n\n") == 1
    assert end_frame("the session is completed") == b'event: end\ndata: {"reason": "the session is completed"}\n\n'


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.text(max_size=30) | st.integers() | st.none(), max_size=4),
       st.integers(1, 2**62))
def test_any_event_parses_back_from_its_frame(data, cursor):
    """What an SSE client does: split at the blank line, take the fields; the event comes back whole."""
    frame = event_frame(cursor, "text", 1, data).decode()
    block, rest = frame.split("\n\n", 1)
    assert rest == ""
    fields = dict(line.split(": ", 1) for line in block.split("\n"))
    assert fields["id"] == str(cursor) and json.loads(fields["data"])["data"] == data


def test_a_logged_request_line_never_holds_the_token_and_only_loopback_is_bound():
    from ouroactors.runtime.coordinator.sse_server import SessionEventServer, loopback, redacted

    line = f'"GET /sessions/s1/events?after=3&access_token={TOKEN}&until=turn_settled HTTP/1.1" 200 -'
    assert TOKEN not in redacted(line) and "access_token=<redacted>&until=turn_settled" in redacted(line)
    assert redacted(f"GET /x?access_token={TOKEN}") == "GET /x?access_token=<redacted>"
    assert [loopback(h) for h in ("127.0.0.1", "127.9.9.9", "::1", "localhost", "0.0.0.0", "::", "10.0.0.1",
                                   "example.org")] == [True, True, True, True, False, False, False, False]
    with pytest.raises(ValueError, match="not a loopback address"):
        SessionEventServer("/nonexistent", "0.0.0.0", 0, TOKEN)
    with pytest.raises(ValueError, match="at least 16"):
        SessionEventServer("/nonexistent", "127.0.0.1", 0, "short")



def test_the_token_file_is_replaced_not_written_through_a_symlink_and_is_private(tmp_path):
    """An attacker's symlink where the token goes (pointing at a file they would read) is replaced, never followed:
    the token lands in a new 0600 file, and the symlink's target is untouched."""
    import os
    import stat

    from ouroactors.cli.session_serve import _write_token

    victim = tmp_path / "theirs.txt"
    victim.write_text("unchanged\n")
    target = tmp_path / "serve.token"
    target.symlink_to(victim)
    _write_token(target, TOKEN)
    assert not target.is_symlink() and target.read_text() == TOKEN + "\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600 and victim.read_text() == "unchanged\n"
