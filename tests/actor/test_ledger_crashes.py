"""The ledger across real SIGKILLs: recovery to ambiguous (never failed), kills in the middle of a
stream of records, concurrent sessions, and reconcilers settling what they can prove."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.ledger.actor import (
    LedgerAnswer,
    ListEntries,
    Reconcile,
    RecordDenied,
    RecordSettled,
)
from ouroactors.authorities.ledger.domain import RESTARTED_BEFORE_SETTLEMENT, LedgerError, Status
from ouroactors.core.errors import OuroactorsError
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.supervision.protocol import Stamped
from ouroactors.system.handle import ActorSystem

from .ledger_support import (
    CONSUMER_PATH,
    LEDGER_PATH,
    STORAGE_PATH,
    agent_tree,
    all_entries,
    counts,
    get_entry,
    kill_and_wait,
    pids,
    settled,
    stamped,
    start_request,
    started,
)

pytestmark = pytest.mark.multiproc


# -- SIGKILL of the ledger: unsettled entries become ambiguous, nothing else moves ---------------------


def test_ledger_sigkill_leaves_unsettled_entries_ambiguous_never_failed(actor_system):
    actor_system.start_tree(agent_tree())
    for i in range(12):
        ask_authority(actor_system, LEDGER_PATH, started(f"e{i}"))
    for i in range(0, 12, 3):
        ask_authority(actor_system, LEDGER_PATH, settled(f"e{i}", evidence={"n": i}))
    ask_authority(actor_system, LEDGER_PATH, settled("e1", "failed", reason="exit 1"))  # failed by its runner
    ask_authority(actor_system, LEDGER_PATH, RecordDenied(start_request("d1"), "refused by rule 7"))
    before = all_entries(actor_system)
    before_pids = pids(actor_system)

    kill_and_wait(actor_system, LEDGER_PATH)

    after_pids = pids(actor_system)
    assert after_pids["storage"] == before_pids["storage"]  # upstream untouched
    assert after_pids["ledger"] != before_pids["ledger"] and after_pids["consumer"] != before_pids["consumer"]
    after = all_entries(actor_system)
    assert set(after) == set(before)  # no committed record lost
    unsettled = {effect_id for effect_id, entry in before.items() if entry.status is Status.STARTED}
    assert len(unsettled) == 7
    for effect_id, entry in after.items():
        assert entry.seq == before[effect_id].seq
        if effect_id in unsettled:
            assert entry.status is Status.AMBIGUOUS
            assert entry.reason == RESTARTED_BEFORE_SETTLEMENT
            assert entry.settled_by is None and entry.evidence is None
            assert entry.model_dump(exclude={"status", "reason", "settled_ns"}) == \
                before[effect_id].model_dump(exclude={"status", "reason", "settled_ns"})
        else:
            assert entry == before[effect_id]  # settled entries are left exactly as they were
    assert [e.effect_id for e in after.values() if e.status is Status.FAILED] == ["e1"]  # its runner's
    status = ask_authority(actor_system, LEDGER_PATH, "status")
    assert status["recovered_ambiguous"] == 7
    assert status["counts"] == {"ok": 4, "failed": 1, "denied": 1, "ambiguous": 7}
    assert ask_authority(actor_system, LEDGER_PATH, started("e5")).answer == "existing"  # ids stay taken
    assert ask_authority(actor_system, LEDGER_PATH, started("new")).entry.seq == 14

    kill_and_wait(actor_system, LEDGER_PATH)  # a second restart finds nothing new to mark
    status = ask_authority(actor_system, LEDGER_PATH, "status")
    assert status["recovered_ambiguous"] == 1  # only "new"
    assert status["counts"] == {"ok": 4, "failed": 1, "denied": 1, "ambiguous": 8}


# -- kills in the middle of a stream of records --------------------------------------------------------


class _Stream(threading.Thread):
    """One sender: distinct ids, started then (mostly) settled, every answer kept.

    Each stream has its own thespian endpoint; after an error it looks the ledger up again (the
    handle's own endpoint is shared, so lookups take ``lock``).
    """

    def __init__(self, system: ActorSystem, name: str, lock: threading.Lock, stop: threading.Event) -> None:
        super().__init__(name=name)
        self.system, self.lock, self.stop = system, lock, stop
        self.starts: dict[str, Any] = {}
        self.settles: dict[str, Any] = {}
        self.ok_times: list[float] = []

    def run(self) -> None:
        with self.system._thespian.private() as context:
            address, self.generation = self._resolve()
            n = 0
            while not self.stop.is_set():
                effect_id = f"{self.name}-{n}"
                answer = self.starts[effect_id] = self._ask(context, address, started(effect_id))
                if isinstance(answer, LedgerAnswer) and n % 4 != 3:  # every 4th is left unsettled
                    answer = self.settles[effect_id] = self._ask(context, address, settled(effect_id))
                    if isinstance(answer, LedgerAnswer):
                        self.ok_times.append(time.monotonic())
                if not isinstance(answer, LedgerAnswer):
                    address, self.generation = self._resolve()
                n += 1

    def _ask(self, context: Any, address: Any, message: Any) -> Any:
        if address is None:
            return OuroactorsError("no ledger to ask")
        try:
            return ActorSystem._unwrap(context.ask(address, Stamped(self.generation, message), 2.0), LEDGER_PATH, 2.0)
        except (OuroactorsError, LedgerError) as exc:  # crashed, timed out, refused, rejected ...
            return exc

    def _resolve(self) -> tuple[Any, int | None]:
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            try:
                with self.lock:
                    return self.system.resolve(LEDGER_PATH), self.system.child_info(LEDGER_PATH).generation
            except OuroactorsError:  # restarting: look again
                time.sleep(0.01)  # bounded poll of the supervisor
        return None, None


@pytest.mark.slow
@pytest.mark.parametrize("victim", [LEDGER_PATH, STORAGE_PATH])
def test_kill_during_a_stream_of_records_keeps_every_answered_commit(actor_system, victim):
    actor_system.start_tree(agent_tree())
    victim_pid = actor_system.child_info(victim).pid
    lock, stop = threading.Lock(), threading.Event()
    streams = [_Stream(actor_system, f"w{k}", lock, stop) for k in range(4)]
    for stream in streams:
        stream.start()
    mark = actor_system.mark()
    try:
        deadline = time.monotonic() + 20.0
        while sum(len(s.ok_times) for s in streams) < 60:  # the stream is flowing
            assert time.monotonic() < deadline, "the streams never got going"
            time.sleep(0.005)  # bounded poll of the streams' progress
        os.kill(victim_pid, signal.SIGKILL)  # lands while four requests are in flight
        killed_at = time.monotonic()
        deadline = killed_at + 30.0
        while sum(1 for s in streams for t in s.ok_times if t > killed_at) < 40:  # and it flows again
            assert time.monotonic() < deadline, "the ledger did not come back and serve within 30s"
            assert all(s.is_alive() for s in streams)
            time.sleep(0.005)  # bounded poll of the streams' progress
    finally:
        stop.set()
        for stream in streams:
            stream.join(30.0)
    actor_system.wait_for("exited", victim, after=mark, predicate=lambda e: e.reason == {"kind": "killed"})
    actor_system.wait_for("started", CONSUMER_PATH, after=mark)
    assert actor_system.child_info(victim).pid != victim_pid
    restarted_ns = actor_system.wait_for("started", LEDGER_PATH, after=mark).time_ns

    starts = {k: v for s in streams for k, v in s.starts.items()}
    settles = {k: v for s in streams for k, v in s.settles.items()}
    entries = all_entries(actor_system)
    for effect_id, answer in starts.items():
        if isinstance(answer, LedgerAnswer):
            assert answer.answer == "created"  # distinct ids
            assert effect_id in entries, f"{effect_id} was answered created but is gone"
            assert entries[effect_id].seq == answer.entry.seq
        else:  # an error says nothing durable happened for sure; it may or may not be there
            assert not isinstance(answer, LedgerError), f"{effect_id}: a valid request was refused: {answer!r}"
    for effect_id, entry in entries.items():
        assert effect_id in starts, f"{effect_id} was never asked for"
        assert entry.status is not Status.FAILED, f"{effect_id} turned failed"
        if isinstance(settles.get(effect_id), LedgerAnswer):
            assert entry.status is Status.OK, f"{effect_id} was answered settled but is {entry.status.value}"
            continue
        if entry.status is Status.OK:  # only a settlement whose answer was lost in the kill
            assert effect_id in settles, f"{effect_id} is ok but was never settled"
        elif entry.status is Status.AMBIGUOUS:
            assert entry.reason == RESTARTED_BEFORE_SETTLEMENT and entry.started_ns < restarted_ns
        else:  # still open: recorded by the new ledger, after recovery
            assert entry.status is Status.STARTED and entry.started_ns > restarted_ns, entry
    assert sorted(entry.seq for entry in entries.values()) == list(range(1, len(entries) + 1))
    ambiguous = [e for e in entries.values() if e.status is Status.AMBIGUOUS]
    assert ambiguous, "the deliberately unsettled entries of before the kill are ambiguous"
    assert ask_authority(actor_system, LEDGER_PATH, "status")["recovered_ambiguous"] == len(ambiguous)
    if victim == LEDGER_PATH:
        lost = [a for a in list(starts.values()) + list(settles.values()) if not isinstance(a, LedgerAnswer)]
        assert lost, "the kill interrupted no request in flight"


@pytest.mark.parametrize("point", ["storage.before_commit", "storage.after_commit"])
def test_kill_inside_a_commit(actor_system, point):
    """A SIGKILL while the ledger holds one request at a commit point: no answer; after the
    restart the entry is absent (before) or ambiguous (after) — never failed, never ok."""
    actor_system.start_tree(agent_tree())
    ask_authority(actor_system, LEDGER_PATH, started("first"))
    address = actor_system.resolve(LEDGER_PATH)
    held_request = stamped(actor_system, LEDGER_PATH, started("held"))
    actor_system.arm_faults(LEDGER_PATH, FaultPlan((FaultRule(point, FaultAction.DELAY, nth=1, delay_s=30.0),)))
    answers: list[Any] = []

    def record() -> None:
        with actor_system._thespian.private() as context:
            answers.append(context.ask(address, held_request, 1.0))

    writer = threading.Thread(target=record)
    writer.start()
    with actor_system._thespian.private() as probe:  # held once a quick ask goes unanswered
        for _ in range(100):
            if probe.ask(address, "status", 0.1) is None:
                break
        else:
            pytest.fail("the ledger never got held at the commit point")
    kill_and_wait(actor_system, LEDGER_PATH)
    writer.join(10.0)
    assert answers == [None]  # the caller never heard: it must reconcile
    held = get_entry(actor_system, "held")
    if point == "storage.before_commit":
        assert held is None
        assert ask_authority(actor_system, LEDGER_PATH, started("held")).answer == "created"  # safe to record again
    else:
        assert held is not None and held.status is Status.AMBIGUOUS and held.seq == 2
        assert ask_authority(actor_system, LEDGER_PATH, started("held")).answer == "existing"
    assert get_entry(actor_system, "first").status is Status.AMBIGUOUS


# -- concurrent sessions ------------------------------------------------------------------------------


def test_concurrent_sessions_each_see_only_their_own_outcomes(actor_system):
    actor_system.start_tree(agent_tree())
    address = actor_system.resolve(LEDGER_PATH)
    generation = actor_system.child_info(LEDGER_PATH).generation
    seen: dict[str, list[Any]] = {}
    errors: list[str] = []

    def session(name: str) -> None:
        answers: list[Any] = []
        try:
            with actor_system._thespian.private() as context:
                for n in range(50):
                    effect_id = f"{name}-{n}"
                    request = start_request(effect_id, session=name)
                    first = ActorSystem._unwrap(
                        context.ask(address, Stamped(generation, started(effect_id, session=name)), 10.0),
                        LEDGER_PATH, 10.0)
                    assert first.answer == "created" and first.entry.effect_id == effect_id, first
                    assert first.entry.session_id == name and first.entry.fingerprint == request.fingerprint
                    settle = RecordSettled(effect_id, "ok", evidence={"session": name, "n": n})
                    done = ActorSystem._unwrap(context.ask(address, Stamped(generation, settle), 10.0),
                                               LEDGER_PATH, 10.0)
                    assert done.entry.effect_id == effect_id and done.entry.status is Status.OK, done
                    assert done.entry.evidence == {"session": name, "n": n}
                    answers.append((first, done))
        except BaseException as exc:  # reported by the main thread
            errors.append(f"{name}: {exc!r}")
        seen[name] = answers

    names = [f"session-{k}" for k in range(8)]
    threads = [threading.Thread(target=session, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60.0)
    assert not errors, errors
    assert all(len(seen[name]) == 50 for name in names)

    entries = all_entries(actor_system)
    assert len(entries) == 400 and all(entry.status is Status.OK for entry in entries.values())
    assert sorted(entry.seq for entry in entries.values()) == list(range(1, 401))
    for name in names:
        mine = ask_authority(actor_system, LEDGER_PATH, ListEntries(session=name, limit=1000))
        assert [entry.effect_id for entry in mine] == [f"{name}-{n}" for n in range(50)]  # in seq order
        assert [first.entry.seq for first, _ in seen[name]] == [entry.seq for entry in mine]
    assert counts(actor_system) == {"ok": 400}


# -- reconcilers ----------------------------------------------------------------------------------------


def test_reconcilers_settle_what_they_can_prove_after_a_restart(actor_system, tmp_path):
    reconcilers = {"example": "tests.actor.reconcile_helpers:reconcile",
                   "shell": "tests.actor.reconcile_helpers:broken"}
    actor_system.start_tree(agent_tree(ledger_kwargs={"reconcilers": reconcilers}))
    proof = tmp_path / "pr-41"
    proof.write_text("https://example.invalid/pull/41")
    later = tmp_path / "pr-42"
    ask_authority(actor_system, LEDGER_PATH, started("proven", kind="example", cause=str(proof)))
    ask_authority(actor_system, LEDGER_PATH, started("unproven", kind="example", cause=str(later)))
    ask_authority(actor_system, LEDGER_PATH, started("shell-1", kind="shell"))  # its reconciler raises
    ask_authority(actor_system, LEDGER_PATH, started("tool-1", kind="tool_call"))  # no reconciler
    ask_authority(actor_system, LEDGER_PATH, started("done", kind="example", cause=str(proof)))
    ask_authority(actor_system, LEDGER_PATH, settled("done", evidence={"by": "runner"}))
    pid = actor_system.child_info(LEDGER_PATH).pid

    kill_and_wait(actor_system, LEDGER_PATH)

    deadline = time.monotonic() + 10.0
    while (entry := get_entry(actor_system, "proven")).status is not Status.OK:
        assert entry.status is Status.AMBIGUOUS, entry
        assert time.monotonic() < deadline, "the start-up reconciliation never settled the proven entry"
        time.sleep(0.01)  # polling the ledger for the start-up run's result, bounded
    assert entry.settled_by == "reconciler:example"
    assert entry.reason == "reconciled by tests.actor.reconcile_helpers:reconcile"  # the registered one
    assert entry.evidence == {"marker": str(proof), "found": "https://example.invalid/pull/41",
                              "key": "idem-proven"}
    for effect_id in ("unproven", "shell-1", "tool-1"):
        left = get_entry(actor_system, effect_id)
        assert left.status is Status.AMBIGUOUS and left.reason == RESTARTED_BEFORE_SETTLEMENT, left
    assert get_entry(actor_system, "done").evidence == {"by": "runner"}  # a settled entry is not re-judged
    assert actor_system.child_info(LEDGER_PATH).pid != pid
    assert ask_authority(actor_system, LEDGER_PATH, "status")["counts"] == {"ok": 2, "ambiguous": 3}

    later.write_text("https://example.invalid/pull/42")  # the world now shows the effect happened
    assert ask_authority(actor_system, LEDGER_PATH, Reconcile()) == {"settled": 1, "ambiguous": 2}
    assert get_entry(actor_system, "unproven").settled_by == "reconciler:example"
    assert ask_authority(actor_system, LEDGER_PATH, Reconcile()) == {"settled": 0, "ambiguous": 2}  # idempotent
    assert counts(actor_system) == {"ok": 3, "ambiguous": 2}
    with pytest.raises(LedgerError, match="already ok"):
        ask_authority(actor_system, LEDGER_PATH, settled("proven", "failed", evidence={"late": True}))



def test_a_watched_runner_that_dies_before_settling_makes_its_entry_ambiguous_at_once(actor_system):
    from ouroactors import supervisor, worker
    from ouroactors.authorities.ledger.actor import GetEntry, RecordStarted, WatchRunner
    from ouroactors.authorities.ledger.domain import StartRequest, fingerprint

    actor_system.start_tree(supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
        supervisor("runners", [worker("runner", "ouroactors.examples.workers:Echo")], intensity=10),
    ]))
    request = StartRequest(effect_id="pr-7", kind="http_request", idempotency_key="pr-7",
                           fingerprint=fingerprint("http_request", {"pr": 7}), principal="s1")
    assert ask_authority(actor_system, "agent/ledger", RecordStarted(request)).answer == "created"
    runner = actor_system.resolve("agent/runners/runner")
    assert ask_authority(actor_system, "agent/ledger", WatchRunner("pr-7", runner)) == "watching"
    actor_system.kill("agent/runners/runner")  # the runner dies with the effect unsettled

    def ambiguous() -> bool:
        return ask_authority(actor_system, "agent/ledger", GetEntry("pr-7")).status.value == "ambiguous"

    from .helpers import wait_until

    wait_until(ambiguous, timeout=10, what="the entry to become ambiguous")
    entry = ask_authority(actor_system, "agent/ledger", GetEntry("pr-7"))
    assert entry.reason == "effect runner exited before settlement"  # ambiguous, never failed
    assert actor_system.child_info("agent/ledger").restarts == 0  # without any ledger restart


def test_a_watched_runner_whose_port_another_worker_holds_is_found_gone(actor_system):
    """A watch may name the runner's worker generation: the heartbeats then go addressed to it, so another worker that
    got a dead runner's port refuses them instead of answering for it. ``pr-8`` names r1's generation at r2's port (as
    if r1 had died and r2 got its port): it becomes ambiguous, while ``pr-9``, naming r1 at its own port and pinged on
    the same heartbeats, stays started. Before, r2 answered for r1 and ``pr-8`` stayed started."""
    from ouroactors import supervisor, worker
    from ouroactors.authorities.ledger.actor import GetEntry, RecordStarted, WatchRunner
    from ouroactors.authorities.ledger.domain import StartRequest, fingerprint

    from .helpers import wait_until

    echo = "ouroactors.examples.workers:Echo"
    actor_system.start_tree(supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
        supervisor("runners", [worker("r1", echo), worker("r2", echo)], intensity=10),
    ]))
    r1, r2 = actor_system.resolve("agent/runners/r1"), actor_system.resolve("agent/runners/r2")
    r1_generation = actor_system.child_info("agent/runners/r1").generation
    for effect_id, runner in (("pr-8", r2), ("pr-9", r1)):
        request = StartRequest(effect_id=effect_id, kind="http_request", idempotency_key=effect_id,
                               fingerprint=fingerprint("http_request", {"pr": effect_id}), principal="s1")
        assert ask_authority(actor_system, "agent/ledger", RecordStarted(request)).answer == "created"
        assert ask_authority(actor_system, "agent/ledger",
                             WatchRunner(effect_id, runner, runner_generation=r1_generation)) == "watching"

    def status(effect_id: str) -> str:
        return ask_authority(actor_system, "agent/ledger", GetEntry(effect_id)).status.value

    wait_until(lambda: status("pr-8") == "ambiguous", timeout=10, what="pr-8 to become ambiguous")
    assert status("pr-9") == "started"


@pytest.mark.parametrize("bad", [0, -1, 2**63, "7", float("nan"), True])
def test_a_runner_generation_that_is_no_positive_64_bit_int_is_refused_and_nothing_is_watched(actor_system, bad):
    from ouroactors import supervisor, worker
    from ouroactors.authorities.ledger.actor import WatchRunner
    from ouroactors.core.errors import BadRequest

    actor_system.start_tree(supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
    ]))
    with pytest.raises(BadRequest) as caught:
        ask_authority(actor_system, "agent/ledger", WatchRunner("pr-1", runner_generation=bad))
    assert caught.value.field == "runner_generation"
    assert actor_system.child_info("agent/ledger").restarts == 0


# -- the ledger's own fault points: a kill at each boundary of an effect -----------------------------


@pytest.mark.parametrize(("point", "settle_first", "status"), [
    ("ledger.start_committed", False, Status.AMBIGUOUS),  # durable start, runner never told: ambiguous
    ("ledger.settle_received", True, Status.AMBIGUOUS),  # the effect ran, its settlement never written
    ("ledger.settle_committed", True, Status.OK),  # durable settlement, only the answer lost
])
def test_a_kill_at_each_ledger_boundary_leaves_a_truthful_entry(actor_system, point, settle_first, status):
    actor_system.start_tree(agent_tree())
    ask_authority(actor_system, LEDGER_PATH, started("warm"))
    if settle_first:
        ask_authority(actor_system, LEDGER_PATH, started("e"))
    mark = actor_system.mark()
    actor_system.arm_faults(LEDGER_PATH, FaultPlan((FaultRule(point, FaultAction.KILL, nth=1),)))
    # No answer: the ledger died at the point. It answers a live ask in milliseconds, so 1 s is ample; an answer
    # (no kill) fails the raises, and the wait below fails unless the ledger really was killed.
    with pytest.raises(OuroactorsError):
        ask_authority(actor_system, LEDGER_PATH, settled("e") if settle_first else started("e"), timeout=1)
    assert actor_system.wait_for("exited", LEDGER_PATH, after=mark).reason == {"kind": "killed"}
    actor_system.wait_for("started", LEDGER_PATH, after=mark)
    entry = get_entry(actor_system, "e")
    assert entry.status is status, entry
    if status is Status.AMBIGUOUS:
        assert entry.reason == RESTARTED_BEFORE_SETTLEMENT
