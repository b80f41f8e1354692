"""``ouroactors journal verify|replay|show|list`` on a data dir holding corpus journals (in-process CLI runner)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest
from click.testing import CliRunner

from ouroactors.authorities.storage.env import StorageConfig, close_env, db, open_env
from ouroactors.cli import main
from ouroactors.core.codec import encode
from ouroactors.runtime.execution import reading
from ouroactors.runtime.execution.archive import read_archive
from ouroactors.runtime.execution.journal import JOURNAL_DB, record_key

CORPUS = Path(__file__).resolve().parents[1] / "data" / "journals"


@pytest.fixture
def data_dir(tmp_path) -> Iterator[tuple[str, lmdb.Environment]]:
    config = StorageConfig.under(tmp_path)
    env = open_env(config)
    for name in ("tools", "text-turns"):
        read_archive(env, CORPUS / f"{name}.journal")
    try:
        yield str(tmp_path), env
    finally:
        close_env(config)


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["journal", *args])
    return result.exit_code, result.output


def test_verify_ok_and_broken_names_the_first_bad_seq(data_dir):
    path, env = data_dir
    code, out = run("verify", "tools", "--data-dir", path)
    assert code == 0 and "20 records verified" in out and "verified through 19" in out and "chain ok" in out
    with env.begin(write=True, db=db(env, JOURNAL_DB)) as txn:
        value = bytes(txn.get(record_key(b"tools", 11)))
        txn.put(record_key(b"tools", 11), value[:-1] + bytes([value[-1] ^ 0x20]))
    code, out = run("verify", "tools", "--data-dir", path)
    assert code == 1 and "BROKEN at seq 11" in out and "verified through 10" in out


def test_replay_ok_and_stops_at_a_boundary(data_dir):
    path, env = data_dir
    code, out = run("replay", "text-turns", "--data-dir", path)
    assert code == 0 and "2 of 2 turns verified" in out and "replay ok" in out
    settled = [r for r in reading.records(env, "text-turns") if r.kind == "turn_settled"][1]
    with env.begin(write=True, db=db(env, JOURNAL_DB)) as txn:
        txn.delete(record_key(b"text-turns", settled.seq))
    code, out = run("replay", "text-turns", "--data-dir", path)
    assert code == 3 and "1 of 2 turns verified" in out and f"stopped at seq {settled.seq}: chain_broken" in out


def test_show_list_and_bad_input(data_dir, tmp_path):
    path, _ = data_dir
    code, out = run("show", "tools", "--data-dir", path, "--json", "--from", "17")
    assert code == 0 and [line.count('"seq"') for line in out.splitlines()] == [1, 1, 1]
    code, out = run("show", "tools", "--data-dir", path)
    assert code == 0 and "turn_settled" in out and "tool_call" in out
    code, out = run("list", "--data-dir", path)
    assert code == 0 and "tools" in out and "text-turns" in out
    code, out = run("verify", "nope", "--data-dir", path)
    assert code == 2 and "no journal for session 'nope'" in out
    code, out = run("verify", "tools", "--data-dir", str(tmp_path / "absent"))
    assert code == 2 and "no ouroactors data" in out and not (tmp_path / "absent").exists()
    code, out = run("verify", "bad/id", "--data-dir", path)
    assert code == 2 and "session id" in out


def test_show_reads_only_the_records_asked_for_and_refuses_bounds_that_name_none(data_dir):
    path, env = data_dir
    everything = reading.records(env, "tools")
    assert [r.seq for r in reading.records(env, "tools", since=5, limit=3)] == [5, 6, 7]
    assert reading.records(env, "tools", since=5, limit=3) == everything[5:8]
    assert reading.records(env, "tools", since=10_000) == [] and reading.records(env, "tools", limit=0) == []
    assert reading.records(env, "tools", since=10**30) == []  # past any 8-byte seq: nothing, not OverflowError
    code, out = run("show", "tools", "--data-dir", path, "--json", "--from", "5", "--limit", "3")
    assert code == 0 and [line.split(",")[0] for line in out.splitlines()] == ['{"seq": 5', '{"seq": 6', '{"seq": 7']
    for bad, words in ((("--from", "-4"), "'--from': -4 is not in the range 0<=x<=9223372036854775807"),
                       (("--limit", "0"), "'--limit': 0 is not in the range x>=1"),
                       (("--from", str(10**23)), "is not in the range 0<=x<=9223372036854775807")):
        code, out = run("show", "tools", "--data-dir", path, *bad)
        assert code == 2 and words in out, out


def test_replay_from_the_snapshot(tmp_path):
    import trio

    from ouroactors.runtime.execution import snapshot_rider, snapshots

    from .loop_support import make_session, text

    config = StorageConfig.under(tmp_path)
    env = open_env(config)
    try:
        h = make_session(env, "long", [[text(f"answer {i}")] for i in range(12)])
        for i in range(12):
            if i == 9:
                report = reading.records(env, "long")[-1]
                assert report.kind == "turn_settled"
                assert snapshot_rider.save(env, "long", report.seq, report.hash, h.loop.state(),
                                           h.loop.opened or {}) is None
            trio.run(h.loop.run_turn, f"question {i}")
        code, out = run("replay", "long", "--from-snapshot", "--data-dir", str(tmp_path))
        assert code == 0 and "from the conversation snapshot after turn 9" in out and "12 of 12 turns" in out, out
        code, out = run("verify", "long", "--data-dir", str(tmp_path))
        assert code == 0 and "conversation snapshot after turn 9" in out and "attested by the chain" in out, out
        code, out = run("verify", "text-turns", "--data-dir", str(tmp_path))
        assert "no journal" in out  # not here; and a session without a snapshot prints no snapshot line:
        h2 = make_session(env, "short", [[text("x")]])
        trio.run(h2.loop.run_turn, "q")
        code, out = run("verify", "short", "--data-dir", str(tmp_path))
        assert code == 0 and "snapshot" not in out
        state = h.loop.state()
        forged = snapshots.ConversationSnapshot.model_validate(
            {**snapshots.load(env, "long").model_dump(), "tokens_used": state.tokens_used + 7})
        with env.begin(write=True) as txn:
            txn.put(snapshots.snapshot_key(b"long"), encode(forged), db=db(env, b"journal_anchor"))
        code, out = run("verify", "long", "--data-dir", str(tmp_path))
        assert code == 0 and "not usable" in out and "tokens used" in out and "chain ok" in out, out
        code, out = run("replay", "nope", "--from-snapshot", "--data-dir", str(tmp_path))
        assert code == 2 and "no journal for session 'nope'" in out and "long" in out
        with env.begin(write=True) as txn:
            txn.put(snapshots.snapshot_key(b"long"), b"\x01", db=db(env, b"journal_anchor"))
        code, out = run("replay", "long", "--from-snapshot", "--data-dir", str(tmp_path))
        assert code == 0 and "snapshot not used (the snapshot does not decode" in out and "12 of 12" in out, out
    finally:
        close_env(config)


def test_replay_of_a_turn_its_session_cancelled_says_who_settled_it(data_dir):
    """A turn a cancel cut short (in an approval wait: its runtime was gone) has no settlement in the journal — the
    coordinator settled it in the session's log. The replay still stops there (exit 3), and says why the journal
    cannot settle it; a journal whose last turn the log does not explain gets the boundary alone."""
    from ouroactors.runtime.coordinator.publication import plan
    from ouroactors.runtime.coordinator.store import SessionStore
    from ouroactors.runtime.coordinator.workflow import Event
    from ouroactors.runtime.execution.journal import Journal
    from ouroactors.runtime.execution.output import Batch, OutputEvent

    from ..coordinator.support import new_record

    path, env = data_dir
    store = SessionStore(env)
    created = store.create(new_record("c9")).value  # (a session's id is refused once a journal has it)
    journal = Journal(env, "c9")
    for record in list(reading.records(env, "text-turns"))[:5]:  # opened, turn 1 started, its prompt and model call
        assert journal.append(record.kind, record.fields, turn=record.turn, at=record.at).committed
    code, out = run("replay", "c9", "--data-dir", path)
    assert code == 3 and "stopped at seq 1: unsettled_turn" in out and "settled by its coordinator" not in out

    events = (OutputEvent(1, "turn_started", 1, {"prompt": "hi"}),
              OutputEvent(2, "turn_settled", 1, {"status": "cancelled", "reason": "cancelled by alice",
                                                 "settled_by": "coordinator"}))
    step = plan(Batch(events, 0, 2, False), 0, created.log_digest, created.conversation_digest)
    assert store.checkpoint("c9", created.revision, step, then=Event.CANCEL, reason="cancelled by alice").value
    code, out = run("replay", "c9", "--data-dir", path)
    assert code == 3 and "stopped at seq 1: unsettled_turn" in out
    assert "the session's log ends turn 1 cancelled (cancelled by alice), settled by its coordinator" in out


def test_replay_of_a_turn_its_coordinator_ended_verifies_the_rest_and_names_it(data_dir):
    """The coordinator now ends such a turn in the journal too (``turn_ended``, in the log's own commit): replay
    verifies every settled turn before it, names the ended one (not run through the loop: nothing of the loop's
    settles it) and exits 0. Anything journaled after an ended turn is a boundary: the session's end is terminal."""
    from ouroactors.runtime.execution.journal import Journal

    path, env = data_dir
    settled = list(reading.records(env, "text-turns"))
    first_end = next(r.seq for r in settled if r.kind == "turn_settled")
    journal = Journal(env, "e1")
    for record in settled[:first_end + 1] + settled[first_end + 1:first_end + 4]:  # turn 1 settled, turn 2 begun
        assert journal.append(record.kind, record.fields, turn=record.turn, at=record.at).committed
    ended = {"status": "cancelled", "reason": "cancelled by alice", "settled_by": "coordinator", "cursor": 9}
    assert journal.append("turn_ended", ended, turn=2, at=settled[-1].at).committed
    code, out = run("replay", "e1", "--data-dir", path)
    assert code == 0 and "1 of 2 turns verified" in out and "replay ok" in out, out
    assert "turn 2 was ended by its coordinator at seq" in out and "(cancelled: cancelled by alice)" in out, out
    code, out = run("show", "e1", "--data-dir", path)
    assert code == 0 and "turn_ended" in out and "settled_by='coordinator'" in out, out

    assert journal.append("prompt", {"text": "more"}, turn=3, at=settled[-1].at).committed
    code, out = run("replay", "e1", "--data-dir", path)
    assert code == 3 and "after_ended_turn" in out and "turn 2 was ended by its coordinator" in out, out


@pytest.mark.parametrize("fields", [
    {"status": 7, "reason": "x", "settled_by": "coordinator"},
    {"status": "cancelled", "reason": None, "settled_by": "coordinator"},
    {"status": "cancelled", "reason": "x"},
    {"status": "cancelled", "reason": "x", "settled_by": ["coordinator"]},
])
def test_a_crafted_turn_ended_record_is_an_unreadable_boundary_not_a_crash(data_dir, fields):
    """A chained but malformed ``turn_ended`` (wrong types, a field missing): replay stops there, named, exit 3."""
    from ouroactors.runtime.execution.journal import Journal

    path, env = data_dir
    settled = list(reading.records(env, "text-turns"))
    journal = Journal(env, "e2")
    for record in settled[:5]:
        assert journal.append(record.kind, record.fields, turn=record.turn, at=record.at).committed
    assert journal.append("turn_ended", fields, turn=1, at=settled[-1].at).committed
    code, out = run("replay", "e2", "--data-dir", path)
    assert code == 3 and "unreadable" in out and "was ended by its coordinator" not in out, out
