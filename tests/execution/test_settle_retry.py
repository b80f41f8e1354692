"""A settlement whose commit is refused (nothing written) is committed again: the runner knows the outcome, and a
settlement left ``started`` made the next run of the turn call it unknown and stop on it (found by ``enumerate-sessions
--action commit_rejected --hits all``: the session ended suspended, its turn cut short, with no reason). Refused every
time, the runner stops (the runtime crashes: recovery reconciles the started effect), never goes on as if settled.

The real effect path in one process: inline grants, the direct ledger writer on LMDB, ``true`` in sandbox none."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import trio

from benchmarks.bench_effect_path import _Call, prepared
from ouroactors.core import faults
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.runtime.execution.effects import EffectPathBroken
from ouroactors.runtime.execution.honesty import SETTLE_TRIES
from ouroactors.runtime.execution.loop import ParsedCall
from ouroactors.runtime.execution.model import ToolCall
from ouroactors.runtime.execution.tools.shell import ShellTool

pytestmark = pytest.mark.usefixtures("faults_disarmed")


def _run_one_call(tmp_path: Path, refused_commits: tuple[int, ...], rule: str = "allow:Bash(true)"
                  ) -> tuple[Any, Any]:
    """One ``shell true`` call; the effect path's commits numbered ``refused_commits`` (1: the start or the denial,
    2…: the settlement's) are refused. Its answer (or the exception it raised) and the ledger entry."""
    root = tmp_path / "ws"
    root.mkdir()
    ready = prepared(tmp_path / "data", root, session="s1", authority={"storage": 3, "ledger": 5, "grants": 7},
                     rules=(rule,), watch=False)
    tool = ShellTool()
    model_call = ToolCall(id="c1", name="shell", arguments={"command": "true"})
    ready.journal.stage("tool_call", {"call_id": "c1", "name": "shell", "arguments": model_call.arguments}, turn=1,
                        at=time.time_ns())
    faults.arm(FaultPlan(tuple(FaultRule("storage.before_commit", FaultAction.COMMIT_REJECTED, nth=n)
                               for n in refused_commits)))
    try:
        outcome: Any = trio.run(ready.effects.run, ParsedCall(model_call, (tool, tool.Args.model_validate(
            model_call.arguments))), _Call(ready.journal, model_call))
    except EffectPathBroken as broken:
        outcome = broken
    finally:
        faults.disarm()
    return outcome, ready.store.get("s1/t1/c1")


def test_a_refused_settlement_is_committed_again(tmp_path):
    outcome, entry = _run_one_call(tmp_path, refused_commits=(2,))
    assert outcome.status == "ok"
    assert entry is not None and entry.status.value == "ok" and entry.settled_by == "runner"  # was: started


def test_a_settlement_refused_every_time_stops_the_runner_with_the_effect_started(tmp_path):
    outcome, entry = _run_one_call(tmp_path, refused_commits=tuple(range(2, 2 + SETTLE_TRIES)))
    assert isinstance(outcome, EffectPathBroken) and f"{SETTLE_TRIES} commit(s)" in str(outcome)
    assert entry is not None and entry.status.value == "started"  # it ran; recovery's reconciler decides the rest


def test_a_refused_denial_is_committed_again(tmp_path):
    """The denial's commit refused once: before, the call was reported denied with no ``denied`` entry (the seed: a
    denied call is ``record_denied``)."""
    outcome, entry = _run_one_call(tmp_path, refused_commits=(1,), rule="deny:Bash(true)")
    assert outcome.status == "denied"
    assert entry is not None and entry.status.value == "denied"


def test_a_denial_refused_every_time_is_reported_denied_and_nothing_runs(tmp_path):
    outcome, entry = _run_one_call(tmp_path, refused_commits=tuple(range(1, 1 + SETTLE_TRIES)), rule="deny:Bash(true)")
    assert outcome.status == "denied" and outcome.error_kind == "denied"
    assert entry is None  # unrecorded (a re-run of the turn decides it again); the tool never ran
