"""No gap is silent: what the ledger proves a session's journal holds (``ledger_witness``), on hand-made records and
on a real effect path whose journal puts fail (real LMDB, the direct ledger writer, ``true`` through the sandbox)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio
from click.testing import CliRunner

from benchmarks.bench_effect_path import _Call, prepared
from ouroactors.authorities.storage.env import close_env
from ouroactors.cli import main
from ouroactors.core import faults
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.runtime.coordinator.session_dump import journal_check
from ouroactors.runtime.execution import reading
from ouroactors.runtime.execution.journal import Journal
from ouroactors.runtime.execution.ledger_witness import unjournaled
from ouroactors.runtime.execution.loop import ParsedCall
from ouroactors.runtime.execution.model import ToolCall
from ouroactors.runtime.execution.tools.shell import ShellTool


@dataclass
class Rec:
    kind: str
    turn: int | None = 1
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class Ent:
    effect_id: str
    turn_id: str | None = "t1"
    call_id: str | None = "c1"
    settled_by: str | None = "runner"


def call(cid: str = "c1", turn: int = 1) -> Rec:
    return Rec("tool_call", turn, {"call_id": cid})


def result(cid: str = "c1", turn: int = 1) -> Rec:
    return Rec("tool_result", turn, {"call_id": cid, "status": "ok"})


def gap(**kinds: int) -> Rec:
    return Rec("gap", None, {"lost_records": sum(kinds.values()), "lost_kinds": kinds})


# -- the rule, on hand-made records -----------------------------------------------------------------------------


def test_a_journal_holding_every_call_and_runner_result_is_faithful():
    entries = [Ent("s/t1/c1"), Ent("s/t1/c2", call_id="c2", settled_by=None), Ent("s/t2/c1", turn_id="t2")]
    records = [call(), result(), call("c2"), call("c1", 2), result("c1", 2)]
    assert unjournaled(entries, records) == []


def test_a_missing_tool_call_or_runner_result_is_named():
    found = unjournaled([Ent("s/t1/c1"), Ent("s/t1/c2", call_id="c2")], [call(), call("c2"), result("c2")])
    assert len(found) == 1 and "'s/t1/c1'" in found[0] and "no tool_result for turn 1 call 'c1'" in found[0]
    found = unjournaled([Ent("s/t1/c1")], [result()])
    assert len(found) == 1 and "no tool_call" in found[0]


def test_the_same_call_id_in_another_turn_does_not_count():
    assert unjournaled([Ent("s/t2/c1", turn_id="t2")], [call("c1", 1), result("c1", 1)]) != []


def test_only_a_runner_settlement_needs_a_result():
    for by in (None, "recovery", "operator:alice", "reconciler:http_request"):
        assert unjournaled([Ent("s/t1/c1", settled_by=by)], [call()]) == []


def test_a_gap_excuses_as_many_losses_of_its_kinds_as_it_names():
    entries = [Ent("s/t1/c1"), Ent("s/t1/c2", call_id="c2")]
    assert unjournaled(entries, [gap(tool_call=2, tool_result=2)]) == []
    assert len(unjournaled(entries, [gap(tool_call=1, tool_result=2)])) == 1
    assert len(unjournaled(entries, [gap(model_call=4)])) == 4
    assert unjournaled(entries, [gap(**{"(unknown)": 4})]) == []  # a marker that did not decode: any kind
    not_counts = Rec("gap", None, {"lost_kinds": {"tool_call": "2", "tool_result": -1, "(other)": 1.5}})
    assert len(unjournaled(entries, [not_counts])) == 4  # counts that are none excuse nothing
    assert len(unjournaled(entries, [Rec("gap", None, {"lost_kinds": ["tool_call"]})])) == 4


def test_a_truncated_journal_and_entries_of_no_turn_are_not_judged():
    assert unjournaled([Ent("s/t1/c1")], [Rec("truncated", None, {})]) == []
    assert unjournaled([Ent("x", turn_id=None), Ent("y", turn_id="turn-1"), Ent("z", call_id=None)], []) == []


# -- the real effect path, its journal puts failing ------------------------------------------------------------


pytestmark = pytest.mark.usefixtures("faults_disarmed")


def _one_call_losing_its_journal_puts(tmp_path: Path, write_after: bool = True) -> Any:
    """One call through the live effect path (inline grants, the direct ledger writer with the journal riding in its
    start and its settlement, ``true`` in sandbox mode none); both of the journal's puts fail, the ledger's commits
    do not. Its writer then goes (as its process would), and (``write_after``) a new writer of the session writes a
    turn_started."""
    root = tmp_path / "ws"
    root.mkdir()
    ready = prepared(tmp_path / "data", root, session="s1", authority={"storage": 3, "ledger": 5, "grants": 7},
                     watch=False)
    journal, effects = ready.journal, ready.effects
    journal.stage("turn_started", {}, turn=1, at=time.time_ns())
    assert journal.flush().committed
    tool = ShellTool()
    model_call = ToolCall(id="c1", name="shell", arguments={"command": "true"})
    journal.stage("tool_call", {"call_id": "c1", "name": "shell", "arguments": model_call.arguments}, turn=1,
                  at=time.time_ns())
    faults.arm(FaultPlan((FaultRule("journal.put", FaultAction.RAISE, every=1, times=2),)))  # start, settlement
    outcome = trio.run(effects.run, ParsedCall(model_call, (tool, tool.Args.model_validate(model_call.arguments))),
                       _Call(journal, model_call))
    faults.disarm()
    assert outcome.status == "ok" and journal.degraded
    entry = ready.store.get("s1/t1/c1")
    assert entry is not None and entry.status.value == "ok" and entry.settled_by == "runner"  # the ledger has it all
    env = journal.env
    del journal
    if write_after:
        assert Journal(env, "s1").append("turn_started", {}, turn=2, at=time.time_ns()).committed
    return ready, env


def test_records_a_dead_writer_lost_are_named_by_a_gap_so_the_ledger_witness_finds_nothing_silent(tmp_path):
    ready, env = _one_call_losing_its_journal_puts(tmp_path)
    try:
        kinds = [r.kind for r in reading.records(env, "s1")]
        assert kinds == ["turn_started", "gap", "turn_started"], kinds
        gap_record = reading.records(env, "s1")[1]
        assert gap_record.fields["lost_kinds"] == {"tool_call": 1, "tool_result": 1}
        check = journal_check(env, "s1")
        assert check["verified"] and check["unjournaled"] == []
    finally:
        close_env(ready.config)


def test_without_the_marker_the_loss_is_silent_and_the_ledger_witness_names_it(tmp_path, monkeypatch):
    """The check can fail: with the durable marker switched off, a writer that dies after its puts failed leaves a
    journal that verifies and says nothing of its loss; the ledger's entries name both missing records."""
    monkeypatch.setattr(Journal, "_mark_in", lambda self, txn: None)
    monkeypatch.setattr(Journal, "_mark_alone", lambda self: None)
    ready, env = _one_call_losing_its_journal_puts(tmp_path)
    try:
        assert [r.kind for r in reading.records(env, "s1")] == ["turn_started", "turn_started"]
        check = journal_check(env, "s1")
        assert check["verified"]  # the chain alone cannot tell
        missing = check["unjournaled"]
        assert len(missing) == 2 and "no tool_call" in missing[0] and "no tool_result" in missing[1], missing
    finally:
        close_env(ready.config)


def _verify(data: Path, *more: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["journal", "verify", "s1", "--data-dir", str(data), *more])
    return result.exit_code, result.output


def test_journal_verify_reports_what_the_ledger_proves(tmp_path):
    ready, _env = _one_call_losing_its_journal_puts(tmp_path)
    try:
        code, out = _verify(tmp_path / "data")
        assert code == 0 and "chain ok" in out and "ledger entries of the session: every tool call" in out, out
    finally:
        close_env(ready.config)


def test_journal_verify_names_a_silent_gap_and_exits_1(tmp_path, monkeypatch):
    monkeypatch.setattr(Journal, "_mark_in", lambda self, txn: None)
    monkeypatch.setattr(Journal, "_mark_alone", lambda self: None)
    ready, _env = _one_call_losing_its_journal_puts(tmp_path)
    try:
        code, out = _verify(tmp_path / "data")
        assert code == 1 and "chain ok" in out and out.count("SILENT GAP") == 2 and "'s1/t1/c1'" in out, out
        code, out = _verify(tmp_path / "data", "--no-ledger")  # the chain alone: it verifies
        assert code == 0 and "SILENT GAP" not in out
    finally:
        close_env(ready.config)


def test_a_loss_only_the_marker_holds_yet_is_recorded_not_silent(tmp_path):
    """The writer that lost the records died and nobody has written since: no gap record yet, but the marker holds
    the loss durably (the next write names it). The witness counts it as a gap; ``journal verify`` says it is there."""
    ready, env = _one_call_losing_its_journal_puts(tmp_path, write_after=False)
    try:
        assert [r.kind for r in reading.records(env, "s1")] == ["turn_started"]
        pending = reading.pending_loss(env, "s1")
        assert pending is not None and dict(pending.kinds) == {"tool_call": 1, "tool_result": 1}
        check = journal_check(env, "s1")
        assert check["unjournaled"] == [] and check["gaps"] == 0 and check["pending_lost"] == 2
        code, out = _verify(tmp_path / "data")
        assert code == 0 and "gap marker: 2 record(s) lost (tool_call 1, tool_result 1" in out, out
        assert "SILENT GAP" not in out
    finally:
        close_env(ready.config)
