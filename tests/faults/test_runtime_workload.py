"""The runtime workload: real sessions of the real runtime on multiproc, killed, checked by the invariants.

Every effect here is a tool call the session runtime ran (grants → ledger start → http → settlement, by the
honesty table); the driver only leases, opens sessions, sends turns and drains. What the checkers see is what the
ledger and the world hold afterwards, so a runtime that ran a call twice, ran one without a committed start,
settled an unknown outcome as failed, or lost a record fails these tests.
"""

from __future__ import annotations

import pytest

from ouroactors.faults.runner import BenchError, workload_tree
from ouroactors.faults.runtime_driver import (
    Kill,
    RuntimeDriver,
    RuntimeWorkloadError,
    execution_path,
    kills_for_seed,
    runtime_effect_id,
    runtime_session_id,
)
from ouroactors.faults.workload import WorkloadConfig

CONFIG = WorkloadConfig(sessions=2, effects=2, refuse_every=3, deny_every=4, driver="runtime", ask_timeout=2.0,
                        op_deadline=20.0, lease_wait=10.0)


# -- configuration and refusals (no system) ---------------------------------------------------------------------


def test_config_names_the_driver_and_its_kills():
    with pytest.raises(ValueError, match="driver: 'real'; allowed: 'synthetic', 'runtime'"):
        WorkloadConfig(driver="real")
    with pytest.raises(ValueError, match="kills: the driver's own kills are the runtime driver's"):
        WorkloadConfig(kills=1)
    with pytest.raises(ValueError, match=r"kills: must be an int in \[0, 100\]"):
        WorkloadConfig(driver="runtime", kills=-1)


def test_kills_come_from_the_seed_alone():
    assert kills_for_seed(7, CONFIG) == kills_for_seed(7, CONFIG)
    drawn = {kills_for_seed(seed, CONFIG, count=3) for seed in range(40)}
    assert len(drawn) > 20  # seeds differ
    targets = {k.target for kills in drawn for k in kills}
    assert targets == {"runtime", "ledger"}
    for kills in drawn:
        for kill in kills:
            assert 0 <= kill.session < CONFIG.sessions and 1 <= kill.turn <= CONFIG.effects
    with pytest.raises(ValueError, match="kill target: 'storage'"):
        Kill(0, 1, "storage")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="turn >= 1"):
        Kill(0, 0, "runtime")


def test_the_tree_has_the_runtime_under_execution():
    tree = workload_tree(runtime=True)
    assert execution_path(tree) == "agent/execution"
    assert execution_path(workload_tree()) is None
    with pytest.raises(BenchError, match="needs the grants and workspace"):
        workload_tree(runtime=True, grants=False)


def test_the_simple_base_is_refused_with_the_reason(tmp_path):
    from ouroactors.faults.runner import Bench

    with pytest.raises(BenchError, match=r"needs the multiproc base, not 'simple'.*thread beside the actor"):
        Bench(workload_tree(runtime=True), CONFIG, base="simple", data_dir=tmp_path)
    with pytest.raises(BenchError, match="no execution supervisor of runtimes"):
        Bench(workload_tree(), CONFIG, data_dir=tmp_path)
    assert not any(tmp_path.iterdir())  # refused before anything was made


# -- real sessions on real processes ----------------------------------------------------------------------------


@pytest.mark.multiproc
def test_a_crash_free_run_of_real_sessions_ends_as_expected(fault_bench):
    bench = fault_bench(workload_tree(runtime=True), CONFIG)
    result = bench.run("clean")
    assert result.violations == [], [str(v) for v in result.violations]
    assert result.record.errors == []
    entries = {e.effect_id: e for e in result.observation.run_entries()}
    assert len(entries) == 4
    for effect_id, record in result.record.effects.items():
        entry = entries[effect_id]
        assert entry.status.value == record.expected, (effect_id, entry.status, record.outcome)
        assert entry.idempotency_key == effect_id and entry.kind == "http_request"  # the tool's, keyed by effect
        if record.expected != "denied":
            assert entry.settled_by == "runner" and entry.evidence["idempotency_key"] == effect_id
    assert result.statuses == {"denied": 1, "failed": 1, "ok": 2}
    sid = runtime_session_id("clean", 0)
    world = {d["key"] for d in result.observation.world_log if d["event"] == "delivered"}
    assert runtime_effect_id(sid, 0) in world  # the world saw the runtime's key from the header
    assert all(lease.released for lease in result.record.leases.values())
    assert result.recovery == []  # nothing was left started
    # each session's journal verifies and replays (what journal-unfaithful checks after every seed)
    journals = result.observation.journals
    assert sorted(journals) == [runtime_session_id("clean", i) for i in range(CONFIG.sessions)]
    assert all(j["verified"] and j["divergence"] is None and j["verified_turns"] >= 1 for j in journals.values()), \
        journals


@pytest.mark.multiproc
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_seeded_kills_of_the_runtime_and_the_ledger_break_no_invariant(fault_bench, seed):
    kills = (*kills_for_seed(seed, CONFIG, count=2), Kill(seed % 2, 2, "runtime", "drained"),
             Kill((seed + 1) % 2, 1, "ledger", "sent"))
    bench = fault_bench(workload_tree(runtime=True), CONFIG)
    result = bench.run(f"seed{seed}", kills=kills)
    assert result.violations == [], [str(v) for v in result.violations]
    assert result.record.kills, "no kill fired"
    fired = {k.split(":")[0] for k in result.record.kills}
    assert "ledger" in fired
    statuses = {e.effect_id: e.status.value for e in result.observation.run_entries()}
    if "runtime" not in fired:
        # The ledger's restarts take every runtime down (rest_for_one) at moments the driver does not choose: a
        # runtime may settle the kill's turn and die before the driver drained anything of it (the replacement
        # continues after that turn, and the record says so: unseen), or be gone already when the moment comes
        # (it crashed on the ledger's new generation right after its first output: the driver's kill finds no
        # live pid, and a replacement runs the turn as the crash-free run does). Either way the kill had no
        # moment to land, and the turn shows which.
        killed_turn = runtime_effect_id(runtime_session_id(result.record.run_id, seed % 2), 1)
        record = result.record.effects[killed_turn]
        assert record.outcome.startswith(("unseen", "abandoned")) or statuses.get(killed_turn) == record.expected, \
            (result.record.kills, record.outcome, statuses.get(killed_turn), record.expected)
    for effect_id, record in result.record.effects.items():
        # every effect ends as the crash-free run would, or visibly unsure (ambiguous), or not at all
        assert statuses.get(effect_id) in (record.expected, "ambiguous", None), (effect_id, statuses, record)
    world = [d for d in result.observation.world_log if d["event"] == "delivered"]
    assert len({d["key"] for d in world}) == len(world)  # a replayed turn never reached the world again


@pytest.mark.multiproc
def test_a_seeds_plan_reaches_the_runtimes_and_their_failed_journal_puts_become_gaps(fault_bench):
    """A plan of the run is armed in the execution supervisor too, so the runtimes it forks carry it: here each
    runtime's 2nd and 3rd journal puts fail (the 2nd rides in its first tool call's ledger start, which still
    commits). Nothing may be silent: every session's journal names the loss in a gap record, verifies, replays, and
    holds every record the ledger proves it was given, or a gap naming it."""
    from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

    bench = fault_bench(workload_tree(runtime=True), CONFIG)
    plan = FaultPlan((FaultRule("journal.put", FaultAction.COMMIT_REJECTED, nth=2),
                      FaultRule("journal.put", FaultAction.MAP_FULL, nth=3)))
    result = bench.run("gaps", plan)
    assert result.violations == [], [str(v) for v in result.violations]
    fired = [f for f in result.firings if f.get("point") == "journal.put"]
    assert fired and all("execution" in str(f["path"]) for f in fired), result.firings
    journals = result.observation.journals
    assert sorted(journals) == [runtime_session_id("gaps", i) for i in range(CONFIG.sessions)]
    for sid, check in journals.items():
        assert check["verified"] and check["divergence"] is None and check["unjournaled"] == [], (sid, check)
        assert check["gaps"] >= 1, (sid, check)
    assert result.statuses.get("ok", 0) >= 1  # the sessions went on: the journal is not the gate


@pytest.mark.multiproc
def test_a_replaced_runtime_does_not_run_a_settled_call_of_an_unfinished_turn_again(fault_bench):
    """Killed after turn 2's call was settled but before the turn was journaled: the new runtime continues from
    turn 1, turn 2 is sent again, its call has the same effect id, and the ledger's record stops it."""
    bench = fault_bench(workload_tree(runtime=True), WorkloadConfig(sessions=1, effects=3, driver="runtime"))
    result = bench.run("resend", kills=(Kill(0, 2, "runtime", "result"),))
    assert result.violations == [], [str(v) for v in result.violations]
    assert len(result.record.kills) == 1
    world = [d for d in result.observation.world_log if d["event"] == "delivered"]
    assert sorted(d["key"] for d in world) == [runtime_effect_id("resend:s0", k) for k in range(3)]
    assert all(d["n"] == 1 for d in world)  # turn 2 was sent again to the new runtime: its call did not run again
    second = result.record.effects[runtime_effect_id("resend:s0", 1)]
    # ran once; then reported as the ledger holds it (ok, its recorded result), not run again (the world: once)
    assert second.start_answers == ["tool:ok", "tool:ok"]
    assert result.statuses == {"ok": 3}


def test_the_driver_refuses_a_tree_without_grants():
    class _Context:
        base = "multiproc"

    class _System:
        context = _Context()

    from ouroactors.faults.workload import Targets

    with pytest.raises(RuntimeWorkloadError, match="needs a grants and a workspace"):
        RuntimeDriver(_System(), Targets(ledger="agent/ledger"), None, CONFIG,  # type: ignore[arg-type]
                      execution="agent/execution", workspace_root="/tmp", script_dir="/tmp")


@pytest.mark.slow
@pytest.mark.multiproc
def test_a_runtime_that_runs_an_existing_start_again_is_caught(fault_bench):
    """The attack: a replaced runtime that re-runs the calls the ledger already holds. The table forbids it;
    the planted runtime ignores the table, and the checkers see the second delivery in the world."""
    from tests.faults.planted_runtime import PLANTED_RUNTIME

    tree = workload_tree(runtime=True, runtime_actor=PLANTED_RUNTIME)
    bench = fault_bench(tree, WorkloadConfig(sessions=1, effects=2, driver="runtime"))
    clean = bench.run("clean")
    assert clean.violations == []  # without a death nothing is re-sent: the bug does not show
    result = bench.run("planted", kills=(Kill(0, 2, "runtime", "result"),))
    found = {v.invariant for v in result.violations}
    assert "double-settlement" in found, [str(v) for v in result.violations]
    assert any("reached the world 2 times" in str(v) for v in result.violations)


# -- invariant 6 for the runtime's direct writer (pure) -------------------------------------------------------------


def _entry(effect_id: str, stamp: int, started_ns: int):
    from ouroactors.authorities.ledger.domain import Entry, Status

    return Entry(seq=1, effect_id=effect_id, kind="http_request", idempotency_key=effect_id, fingerprint="f",
                 principal="s", session_id="r:s0", turn_id="t1", call_id="e0", authority={"ledger": stamp},
                 grant=None, cause=None, status=Status.AMBIGUOUS, node="n", started_ns=started_ns)


def _ledger_events():
    from ouroactors.supervision.events import Event

    return [Event("started", "agent/ledger", "agent", "ledger", 10, 1, "n", {"generation": 1}),
            Event("exited", "agent/ledger", "agent", "ledger", 100, 1, "n", {"generation": 1}),
            Event("started", "agent/ledger", "agent", "ledger", 200, 1, "n", {"generation": 2})]


def test_a_direct_start_between_a_ledger_death_and_its_successor_is_fenced_as_designed():
    """The writer's fence is the successor's recovery transaction (ledger/direct.py): a start committed after
    the old ledger died but before the new one started is recovered by it, not a stale act. The actor-path
    checker calls it stale; the direct-writer checker does not — and still flags one after the successor."""
    from ouroactors.faults.checks import stale_generation
    from ouroactors.faults.runtime_driver import RuntimeObservation, stale_generation_direct

    between = RuntimeObservation("r", [_entry("r:s0/t1/e0", 1, 150)], 1, [], events=_ledger_events())
    assert stale_generation_direct(between) == []
    assert [v.invariant for v in stale_generation(between)] == ["stale-generation"]  # the actor-path reading
    after = RuntimeObservation("r", [_entry("r:s0/t1/e0", 1, 250)], 1, [], events=_ledger_events())
    [violation] = stale_generation_direct(after)
    assert "the fence should have refused it" in violation.message
    backwards = RuntimeObservation("r", [_entry("r:s0/t1/e0", 2, 210), _entry("r:s0/t2/e1", 1, 220)], 1, [],
                                   events=_ledger_events())
    assert any("an older generation acted after a newer one" in v.message
               for v in stale_generation_direct(backwards))
    unknown = RuntimeObservation("r", [_entry("r:s0/t1/e0", 7, 50)], 1, [], events=_ledger_events())
    assert "never had" in stale_generation_direct(unknown)[0].message


def test_one_model_call_delivered_under_two_effect_ids_is_a_violation():
    """A runtime that re-ran a crashed turn's call under a new turn number would use a new key: the world's
    per-key dedup cannot see it, this check does."""
    from ouroactors.faults.runtime_checks import RuntimeObservation, call_delivered_once

    def delivered(key: str) -> dict:
        return {"key": key, "event": "delivered", "created": True, "n": 1, "t_ns": 1}

    once = RuntimeObservation("r", [], 1, [delivered("r:s0/t1/e0"), delivered("r:s0/t2/e1"),
                                          delivered("r:s1/t1/e0")])
    assert call_delivered_once(once) == []
    twice = RuntimeObservation("r", [], 1, [delivered("r:s0/t1/e0"), delivered("r:s0/t2/e0")])
    [violation] = call_delivered_once(twice)
    assert violation.invariant == "double-settlement" and violation.subject == "r:s0/e0"
    assert "under 2 effect ids" in violation.message


def test_a_session_journal_that_does_not_verify_or_replays_differently_fails_the_run():
    """A kill must never leave a journal that lies: one that does not verify, or whose replay diverges, is a
    violation of the run; a replay that stops honestly (a turn the kill left unsettled) is not."""
    from ouroactors.faults.runtime_checks import RuntimeObservation, check_runtime_run, journal_unfaithful

    ok = {"verified": True, "broken_seq": None, "reason": "", "divergence": None, "boundary": None,
          "verified_turns": 2}
    clean = RuntimeObservation("r", [], 1, [], journals={"r:s0": ok, "r:s1": {**ok, "boundary": "unsettled_turn"}})
    assert journal_unfaithful(clean) == [] and check_runtime_run(clean) == []
    broken = RuntimeObservation("r", [], 1, [], journals={
        "r:s0": {**ok, "verified": False, "broken_seq": 4, "reason": "prev is not the previous hash"},
        "r:s1": {**ok, "divergence": "Divergence(seq=12)"}})
    found = check_runtime_run(broken)
    assert [(v.invariant, v.subject) for v in found] == [("journal-unfaithful", "r:s0"), ("journal-unfaithful", "r:s1")]
    assert "seq 4: prev is not the previous hash" in found[0].message and "seq=12" in found[1].message


def test_a_silent_gap_the_ledger_witnesses_fails_the_run():
    """A journal that verifies and replays can still have lost records silently: what the ledger's entries prove was
    given to it and no gap names (``session_dump.journal_check``'s ``unjournaled``) is a violation too."""
    from ouroactors.faults.runtime_checks import RuntimeObservation, check_runtime_run

    ok = {"verified": True, "broken_seq": None, "reason": "", "divergence": None, "boundary": None,
          "verified_turns": 2, "unjournaled": []}
    silent = "effect 'r:s0/t1/c1': the ledger has it, the journal has no tool_call for turn 1 call 'c1', ..."
    found = check_runtime_run(RuntimeObservation("r", [], 1, [], journals={"r:s0": {**ok, "unjournaled": [silent]},
                                                                           "r:s1": ok}))
    assert [(v.invariant, v.subject) for v in found] == [("journal-unfaithful", "r:s0")]
    assert "a silent gap" in found[0].message and "no tool_call" in found[0].message


def test_an_answer_of_another_kind_is_a_wrong_answer_the_driver_counts_as_a_failed_ask():
    """A chaos campaign's driver once read ``.turn`` off its own ``RuntimeStatusRequest``, handed back as the answer
    through a dead runtime's reused port, and the whole campaign ended as a harness error. The driver now checks
    what it was answered: anything else is a :class:`WrongAnswer`, one of the failures it retries after."""
    from ouroactors.faults._asking import WrongAnswer, expect_answer
    from ouroactors.faults.runtime_driver import ASK_FAILURES
    from ouroactors.runtime.execution.messages import RuntimeStatus, RuntimeStatusRequest

    status = RuntimeStatus("s", "r1", 3, True, 1, False, 0, 0)
    assert expect_answer(status, RuntimeStatus, "agent/execution/runtime#1") is status
    with pytest.raises(WrongAnswer, match=r"runtime#1 answered RuntimeStatusRequest, not RuntimeStatus") as caught:
        expect_answer(RuntimeStatusRequest(), RuntimeStatus, "agent/execution/runtime#1")
    assert isinstance(caught.value, ASK_FAILURES)
