"""Verified replay: the committed corpus replays through today's loop; a changed loop diverges at the exact seq;
replay stops honestly at boundaries with the turns before verified; replay writes nothing and runs nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import lmdb
import pytest
import trio

from ouroactors.authorities.storage.env import db
from ouroactors.core import faults
from ouroactors.core.codec import encode
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.runtime.execution import chain, journal, reading, steps
from ouroactors.runtime.execution.archive import export_journal, import_journal, read_archive
from ouroactors.runtime.execution.chain import JournalEntry
from ouroactors.runtime.execution.journal import ANCHOR_DB, JOURNAL_DB, head_key, record_key
from ouroactors.runtime.execution.model import Message
from ouroactors.runtime.execution.replay import replay, replay_session
from ouroactors.runtime.execution.tail import SettledTail

from .journal_corpus import SESSIONS
from .loop_support import FakeEffects, call, flip_last_byte, make_session, text, usage

CORPUS = Path(__file__).resolve().parents[1] / "data" / "journals"


@pytest.fixture(autouse=True)
def _disarmed() -> Iterator[None]:
    yield
    faults.disarm()  # a test that armed a plan leaves none behind


@pytest.mark.parametrize("name", SESSIONS)
def test_committed_corpus_replays_through_todays_loop(env, name):
    session = read_archive(env, CORPUS / f"{name}.journal")
    assert reading.verify(env, session).ok
    report = replay(env, session)
    assert report.ok and report.boundary is None and report.verified_turns == report.turns >= 1, report


def test_corpus_archive_round_trips_byte_for_byte(env):
    session = read_archive(env, CORPUS / "tools.journal")
    assert export_journal(env, session) == (CORPUS / "tools.journal").read_bytes()


def test_a_changed_loop_diverges_at_the_exact_model_call(env, monkeypatch):
    session = read_archive(env, CORPUS / "tools.journal")
    original = steps.build_request

    def changed(model, system, conversation, tools, max_output_tokens):  # a "harmless" prompt tweak
        tweaked = Message(role="system", content=system.content + " Be brief.")
        return original(model, tweaked, conversation, tools, max_output_tokens)

    monkeypatch.setattr(steps, "build_request", changed)
    report = replay(env, session)
    first_call = next(r for r in reading.records(env, session) if r.kind == "model_call")
    assert report.divergence is not None and report.verified_turns == 0
    d = report.divergence
    assert (d.seq, d.turn, d.field) == (first_call.seq, 1, "model_call.request_digest")
    assert d.expected == first_call.fields["request_digest"] and d.actual != d.expected


def test_a_changed_tool_message_diverges_at_the_next_model_call(env, monkeypatch):
    session = read_archive(env, CORPUS / "tools.journal")
    monkeypatch.setattr(steps, "tool_text", lambda *a: "changed")
    report = replay(env, session)
    calls = [r for r in reading.records(env, session) if r.kind == "model_call"]
    assert report.divergence is not None and report.divergence.seq == calls[1].seq


def test_a_changed_settle_rule_diverges_at_turn_settled(env, monkeypatch):
    session = read_archive(env, CORPUS / "text-turns.journal")
    monkeypatch.setattr(steps.Digests, "conversation", lambda self, conversation: "x" * 64)
    report = replay(env, session)
    settled = next(r for r in reading.records(env, session) if r.kind == "turn_settled")
    d = report.divergence
    assert d is not None and (d.seq, d.field) == (settled.seq, "turn_settled.conversation_digest")


def test_replay_runs_nothing_and_writes_nothing(env):
    effects = FakeEffects()
    h = make_session(env, "s1", [[call("c1", "read", path="x")], [text("ok")]], effects=effects)
    trio.run(h.loop.run_turn, "go")
    calls, before = list(effects.calls), reading.head(env, "s1")
    with env.begin() as txn:
        entries = txn.stat(db(env, JOURNAL_DB))["entries"], txn.stat(db(env, b"ledger"))["entries"]
    assert replay(env, "s1").verified_turns == 1
    with env.begin() as txn:
        assert (txn.stat(db(env, JOURNAL_DB))["entries"], txn.stat(db(env, b"ledger"))["entries"]) == entries
    assert effects.calls == calls and reading.head(env, "s1") == before


# -- boundaries ---------------------------------------------------------------------------------------------


def _three_turns(env: lmdb.Environment, **kw):
    h = make_session(env, "s1", [[text("a")], [text("b")], [text("c")]], **kw)
    for prompt in ("1", "2", "3"):
        trio.run(h.loop.run_turn, prompt)
    return h


def test_boundary_at_gap_with_earlier_turns_verified(env):
    h = make_session(env, "s1", [[text("a")], [text("b")], [text("c")]])
    trio.run(h.loop.run_turn, "1")
    faults.arm(FaultPlan((FaultRule("storage.before_commit", FaultAction.COMMIT_REJECTED, nth=1, times=1),)))
    trio.run(h.loop.run_turn, "2")  # its first flush fails: turn_started, prompt, model_call lost
    faults.disarm()
    trio.run(h.loop.run_turn, "3")
    settled = [data for kind, _, data in h.sink.events if kind == "turn_settled"]
    assert [d["journal_degraded"] for d in settled] == [False, False, False]  # the gap was written by turn 2's end
    gap = next(r for r in reading.records(env, "s1") if r.kind == "gap")
    report = replay(env, "s1")
    assert report.ok and report.verified_turns == 1 and report.boundary is not None
    assert (report.boundary.reason, report.boundary.seq) == ("gap", gap.seq)


def test_boundary_at_unsettled_turn(env):
    h = make_session(env, "s1", [[text("a")], [text("b")]])
    trio.run(h.loop.run_turn, "1")
    j = journal.Journal(env, "s1")  # a crash mid-turn: started and prompted, never settled
    for kind, fields in (("turn_started", {"turn": 2}), ("prompt", {"text": "2"})):
        j.stage(kind, fields, turn=2, at=h.clock.now_ns())
    j.flush()
    started = [r for r in reading.records(env, "s1") if r.kind == "turn_started"][-1]
    report = replay(env, "s1")
    assert report.verified_turns == 1 and report.boundary is not None
    assert (report.boundary.reason, report.boundary.seq) == ("unsettled_turn", started.seq)


def test_a_run_cut_short_and_run_again_is_counted_not_replayed(env):
    h = make_session(env, "s1", [[text("a")], [text("b")]])
    trio.run(h.loop.run_turn, "1")
    j = journal.Journal(env, "s1")  # turn 2's first run: its runtime ended before the turn settled
    for kind, fields in (("turn_started", {"turn": 2}), ("prompt", {"text": "2"})):
        j.stage(kind, fields, turn=2, at=h.clock.now_ns())
    j.flush()
    trio.run(h.loop.run_turn, "2")  # a later runtime runs turn 2 again, to its end
    report = replay(env, "s1")
    assert report.ok and report.boundary is None
    assert (report.turns, report.verified_turns, report.cut_short) == (3, 2, 1)


def test_boundary_at_missing_blob(env):
    h = make_session(env, "s1", [[text("a")], [text("b")]])
    trio.run(h.loop.run_turn, "1")
    trio.run(h.loop.run_turn, "x" * 5000)  # the prompt goes to a blob
    prompt = [r for r in reading.records(env, "s1") if r.kind == "prompt"][-1]
    with env.begin(write=True, db=db(env, b"journal_blobs")) as txn:
        txn.delete(bytes.fromhex(prompt.fields["text"]["$blob"]))
    report = replay(env, "s1")
    assert report.verified_turns == 1 and report.boundary is not None
    assert (report.boundary.reason, report.boundary.seq) == ("missing_blob", prompt.seq)


def _append_raw(env: lmdb.Environment, kind: str, body: bytes | None = None) -> int:
    """Append a record the journal itself would refuse (unknown kind / undecodable body), chained and anchored."""
    sid = b"s1"
    h = reading.head(env, "s1")
    assert h is not None
    seq = h.head_seq + 1
    body = body or encode(JournalEntry(at=0, turn=None, kind=kind, fields={}))
    digest, value = chain.seal(h.head_hash, seq, body)
    with env.begin(write=True) as txn:
        txn.put(record_key(sid, seq), value, db=db(env, JOURNAL_DB))
        txn.put(record_key(sid, seq), digest, db=db(env, ANCHOR_DB))
        txn.put(head_key(sid), encode(h.model_copy(update={"head_seq": seq, "head_hash": digest})),
                db=db(env, ANCHOR_DB))
    return seq


@pytest.mark.parametrize(("kind", "body", "reason"), [
    ("compaction", None, "unknown_kind"), ("prompt", b"\x93garbage", "unreadable")])
def test_boundary_at_unknown_or_unreadable_record(env, kind, body, reason):
    h = make_session(env, "s1", [[text("a")], [text("b")]])
    trio.run(h.loop.run_turn, "1")
    seq = _append_raw(env, kind, body)
    trio.run(h.loop.run_turn, "2")
    assert reading.verify(env, "s1").ok
    report = replay(env, "s1")
    assert report.verified_turns == 1 and report.boundary is not None
    assert (report.boundary.reason, report.boundary.seq) == (reason, seq)


def test_boundary_at_a_broken_chain(env):
    _three_turns(env)
    settled = [r for r in reading.records(env, "s1") if r.kind == "turn_settled"]
    flip_last_byte(env, "s1", settled[1].seq)
    report = replay(env, "s1")
    assert report.verified_turns == 1 and report.boundary is not None
    assert (report.boundary.reason, report.boundary.seq) == ("chain_broken", settled[1].seq)


def test_boundary_at_truncated_head(env):
    h = make_session(env, "s1", [[text("a" * 300)] for _ in range(30)])
    h.journal.budget_bytes = 6000
    for i in range(30):
        trio.run(h.loop.run_turn, f"turn {i}")
    first = reading.records(env, "s1")[0]
    assert first.kind == "truncated" and reading.verify(env, "s1").ok
    report = replay(env, "s1")
    assert report.verified_turns == 0 and report.boundary is not None
    assert (report.boundary.reason, report.boundary.seq) == ("truncated", first.seq)


def test_import_refuses_to_overwrite_and_bad_archives(env):
    read_archive(env, CORPUS / "text-turns.journal")
    with pytest.raises(journal.JournalError, match="already"):
        read_archive(env, CORPUS / "text-turns.journal")
    with pytest.raises(journal.JournalError, match="archive"):
        import_journal(env, b"\x00garbage", session="other")


@pytest.mark.slow
def test_replay_of_a_100_turn_session_under_a_second(env):
    turns = []
    for i in range(100):
        turns.append([call(f"r{i}", "read", path=f"f{i}.txt"), usage(10, 5)])
        turns.append([text(f"answer {i}"), usage(10, 5)])
    h = make_session(env, "s1", turns, config='[sandbox]\nmode = "none"\n[limits]\nmax_tokens = 100000000')
    for i in range(100):
        trio.run(h.loop.run_turn, f"question {i}")
    started = time.perf_counter()
    report = replay(env, "s1")
    took = time.perf_counter() - started
    assert report.ok and report.verified_turns == 100, report
    assert took < 3.0, f"replay took {took:.2f} s (goal 1 s; 3 s allowed on a loaded 2-core box)"


def test_approvals_recorded_by_the_effect_port_replay(env):
    class Approving(FakeEffects):
        async def run(self, call, ctx):
            await ctx.emit("approval_needed", {"tool": call.call.name})
            ctx.record_approval({"approval_id": f"a-{call.call.id}", "answer": "allow", "by": "operator"})
            return await super().run(call, ctx)

    h = make_session(env, "s1", [[call("c1", "read", path="x"), call("c2", "list", path=".")], [text("ok")]],
                     effects=Approving(barrier=2))
    trio.run(h.loop.run_turn, "go")
    assert [r.kind for r in reading.records(env, "s1")].count("approval") == 2
    assert "approval_needed" in h.sink.kinds()
    report = replay(env, "s1")
    assert report.ok and report.verified_turns == 1 and report.boundary is None, report


def test_replay_with_todays_tools_finds_a_changed_tool_schema(env):
    from ouroactors.runtime.execution.ports import ToolsCatalog

    h = make_session(env, "s1", [[call("c1", "read", path="x")], [text("ok")]])
    trio.run(h.loop.run_turn, "go")
    assert replay(env, "s1", catalog=ToolsCatalog(("read", "list", "write"))).ok  # the tools it ran with
    report = replay(env, "s1", catalog=ToolsCatalog(("read", "list")))  # write withdrawn since
    assert report.divergence is not None and report.divergence.field == "model_call.request_digest"


def test_a_session_continues_from_its_replayed_state(env):
    """Crash after turn 1 of 2 (turn 2 unsettled): replay gives turn 1's state; a new loop continues from it."""
    h = make_session(env, "s1", [[text("a")], [text("b")]])
    trio.run(h.loop.run_turn, "1")
    expected = h.loop.state()
    j = journal.Journal(env, "s1")
    j.append("turn_started", {"turn": 2}, turn=2, at=h.clock.now_ns())
    report = replay(env, "s1")
    assert report.boundary is not None and report.boundary.reason == "unsettled_turn"
    assert report.state == expected
    again = make_session(env, "s2", [[text("a")], [text("b")]])
    again.loop.restore(report.state)
    outcome = trio.run(again.loop.run_turn, "2")
    assert outcome.turn == 2 and [m.content for m in again.loop.conversation] == ["1", "a", "2", "b"]


# -- a settled turn's tail, derived again (what a replacement runtime publishes after a crash withheld it) --------


def test_a_settled_turns_events_are_derived_again_exactly_as_the_live_loop_emitted_them(env):
    h = make_session(env, "s1", [[text("a")], [call("c1", "list", path=".")], [text("b")], [text("c")]])
    for prompt in ("1", "2"):
        trio.run(h.loop.run_turn, prompt)
    live = [(kind, turn, data) for kind, turn, data in h.sink.events if turn == 2]
    assert live[0][0] == "turn_started" and live[-1][0] == "turn_settled" and len(live) >= 4
    tail = SettledTail(2)
    report = trio.run(partial(replay_session, env, "s1", sink=tail))
    assert report.ok and tail.settled
    assert tail.events == live  # every event, data and order, of the settled turn
    assert not SettledTail(3).settled and SettledTail(3).events == []  # a turn the journal never settled
    assert not SettledTail(0).settled  # none asked for
