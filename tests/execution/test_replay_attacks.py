"""Attacks on replay and import: a journal is secret-free, so anyone can write a *valid chain* of crafted records.
Replay must stop at them as an honest boundary (naming the seq), never crash or act; import must refuse junk."""

from __future__ import annotations

from typing import Any

import lmdb
import msgpack
import pytest
import trio

from ouroactors.runtime.execution import reading, steps
from ouroactors.runtime.execution.archive import import_journal
from ouroactors.runtime.execution.journal import Journal, JournalError
from ouroactors.runtime.execution.model import Message
from ouroactors.runtime.execution.replay import replay

from .loop_support import FakeEffects, call, make_session, text


def _crafted_second_turn(env: lmdb.Environment, kind: str, fields: dict[str, Any]) -> int:
    """One honest turn, then a second turn whose ``kind`` record carries ``fields`` (chained and anchored)."""
    h = make_session(env, "s1", [[text("a")]])
    trio.run(h.loop.run_turn, "1")
    j = Journal(env, "s1")
    loop = h.loop
    request = steps.build_request("scripted", loop._system, [*loop.conversation, Message(role="user", content="2")],
                                  loop.ports.catalog.specs(), None)
    honest = {"turn_started": {"turn": 2}, "prompt": {"text": "2"},
              "model_call": {"index": 0, "request_digest": steps.request_digest(request)},
              "model_result": {"index": 0, "chunks": ["b"], "tool_calls": [], "usage": None, "finish": "stop"},
              "turn_settled": {"status": "completed", "conversation_digest": "0" * 64}}
    for k, f in honest.items():
        j.stage(k, fields if k == kind else f, turn=2, at=h.clock.now_ns())
    assert j.flush().committed and reading.verify(env, "s1").ok
    return next(r.seq for r in reading.records(env, "s1") if r.turn == 2 and r.kind == kind)


@pytest.mark.parametrize(("kind", "fields"), [
    ("model_result", {"index": 0, "chunks": 5, "tool_calls": [], "finish": "stop"}),
    ("model_result", {"index": 0, "chunks": ["x"], "tool_calls": ["not a call"], "finish": "stop"}),
    ("model_result", {"index": 0, "chunks": ["x"], "tool_calls": [], "finish": "exploded"}),
    ("model_result", {"index": 0, "error": {"kind": "meteor", "detail": "x"}}),
    ("model_result", {"index": "0", "chunks": [], "tool_calls": [], "finish": "stop"}),
    ("prompt", {"text": {"nested": True}}),
    ("turn_started", {"turn": True}),
    ("turn_settled", {"status": "completed"}),
])
def test_crafted_records_stop_replay_at_their_seq(env, kind, fields):
    seq = _crafted_second_turn(env, kind, fields)
    report = replay(env, "s1")
    assert report.verified_turns == 1 and report.boundary is not None, report
    assert (report.boundary.reason, report.boundary.seq) == ("unreadable", seq)


def test_crafted_tool_call_in_a_result_is_not_run_by_replay(env):
    """A crafted model_result naming a tool call: replay feeds the recorded result, and no tool ever runs."""
    effects = FakeEffects()
    h = make_session(env, "s1", [[call("c1", "read", path="x")], [text("ok")]], effects=effects)
    trio.run(h.loop.run_turn, "go")
    ran = list(effects.calls)
    assert replay(env, "s1").ok and effects.calls == ran


def test_crafted_usage_that_the_loop_cannot_take_is_unreplayable(env):
    seq = _crafted_second_turn(env, "model_result", {"index": 0, "chunks": ["b"], "tool_calls": [],
                                                     "usage": {"input_tokens": "lots"}, "finish": "stop"})
    report = replay(env, "s1")
    assert report.verified_turns == 1 and report.boundary is not None
    assert report.boundary.reason == "unreplayable" and report.boundary.seq == seq


@pytest.mark.parametrize("doc", [
    {"format": "ouroactors.journal", "version": 1, "session": "x", "head": {}, "records": []},
    {"format": "ouroactors.journal", "version": 1, "session": "x",
     "head": {"first_seq": 0, "head_seq": 0, "head_hash": b"0" * 32, "bytes": 1, "records": 1},
     "records": [b"short"]},
    {"format": "ouroactors.journal", "version": 1, "session": "../../etc", "head": {}, "records": []},
    {"format": "ouroactors.journal", "version": 2},
    {"format": "ouroactors.journal", "version": 1, "head": {}, "records": []},  # no session id
    {"format": "ouroactors.journal", "version": 1, "session": ["x"], "head": {}, "records": []},
    ["not", "a", "map"],
])
def test_junk_archives_are_refused_and_write_nothing(env, doc):
    with pytest.raises(JournalError):
        import_journal(env, msgpack.packb(doc, use_bin_type=True))
    assert reading.sessions(env) == []


def _corpus(name: str = "tools") -> dict[str, Any]:
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "data" / "journals" / f"{name}.journal"
    doc: dict[str, Any] = msgpack.unpackb(path.read_bytes(), raw=False, strict_map_key=False)
    return doc


@pytest.mark.parametrize("squat", ["wrong bytes", "bad address", "short address"])
def test_an_archive_cannot_plant_a_blob_under_an_address_it_does_not_hash_to(env, squat):
    """Blobs are content-addressed and shared by every session of the node: an archive whose blob is not the bytes
    its address names (or whose address is no sha256) is refused whole — else it would squat the address, and the
    session that later spills those bytes would find its own blob missing."""
    import hashlib

    from ouroactors.runtime.execution import blobs

    doc = _corpus()
    address = hashlib.sha256(b"a future session's large output").hexdigest()
    planted = {"wrong bytes": {address: b"not those bytes"}, "bad address": {"zz" * 32: b"x"},
               "short address": {"ab": b"x"}}[squat]
    doc["blobs"] = {**doc["blobs"], **planted}
    with pytest.raises(JournalError, match="blob"):
        import_journal(env, msgpack.packb(doc, use_bin_type=True), session="squatter")
    assert reading.sessions(env) == [] and blobs.get(env, address) is None


def test_a_blob_stored_wrong_is_repaired_by_the_next_put_of_its_bytes(env):
    """A blob whose stored bytes do not hash to its key (written by an older import, or damaged) does not hold the
    address forever: putting the right bytes replaces it; putting bytes already right changes nothing."""
    import hashlib

    from ouroactors.authorities.storage.env import db
    from ouroactors.runtime.execution import blobs

    data = b"a large tool output" * 10
    address = hashlib.sha256(data).hexdigest()
    with env.begin(write=True) as txn:
        txn.put(bytes.fromhex(address), b"squatted", db=db(env, blobs.BLOBS_DB))
    assert blobs.get(env, address) is None  # read as missing, never as the wrong bytes
    with env.begin(write=True) as txn:
        blobs.put(txn, env, data, address)
    assert blobs.get(env, address) == data
    before = env.info()["last_txnid"]
    with env.begin(write=True) as txn:
        blobs.put(txn, env, data, address)  # already there and right: nothing to write
    assert blobs.get(env, address) == data and env.info()["last_txnid"] == before  # an empty commit
