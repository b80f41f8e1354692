"""Direct ledger writers on real processes: a leaf actor records effects from its own process, the
agent tree's rest_for_one rebinds it to new generations, a writer of a gone generation is fenced off
by the transaction, and a writer's death makes its unsettled starts ambiguous at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from ouroactors import StaleGeneration, supervisor, worker
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.ledger.actor import WRITER_EXITED
from ouroactors.authorities.ledger.direct import LedgerWriter
from ouroactors.authorities.ledger.domain import Status
from ouroactors.authorities.ledger.store import Stamp
from ouroactors.authorities.storage.actor import Reopen
from ouroactors.authorities.storage.env import StorageConfig, close_env

from .helpers import wait_until
from .ledger_support import (
    LEDGER,
    LEDGER_PATH,
    STORAGE,
    STORAGE_PATH,
    all_entries,
    get_entry,
    kill_and_wait,
    settled,
    started,
)

pytestmark = pytest.mark.multiproc

RECORDER_PATH = "agent/recorder"


def recorder_tree() -> Any:
    return supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", STORAGE),
        worker("ledger", LEDGER),
        worker("recorder", "ouroactors.examples.workers:DirectRecorder"),
    ])


@pytest.fixture
def system(actor_system: Any) -> Iterator[Any]:
    actor_system.start_tree(recorder_tree())
    yield actor_system
    close_env(StorageConfig.under(actor_system.context.data_dir))  # this test process's own handle, if opened


def generations(system: Any) -> tuple[int, int]:
    return system.child_info(STORAGE_PATH).generation, system.child_info(LEDGER_PATH).generation


def test_a_leaf_actor_records_directly_and_a_ledger_restart_rebinds_it(system):
    assert system.ask(RECORDER_PATH, "stamp") == generations(system)
    assert system.ask(RECORDER_PATH, started("e1")).answer == "created"
    assert system.ask(RECORDER_PATH, settled("e1")).entry.status is Status.OK
    assert system.ask(RECORDER_PATH, started("e2")).answer == "created"
    status = ask_authority(system, LEDGER_PATH, "status")
    assert status["counts"] == {"ok": 1, "started": 1}
    assert status["group_commit"]["records"] == 0  # none of it went through the ledger actor
    outsider = LedgerWriter(system.context.data_dir, watch=False)  # a local program, same generations
    assert outsider.stamp == Stamp(*generations(system))

    kill_and_wait(system, LEDGER_PATH, restarted_last=RECORDER_PATH)

    assert get_entry(system, "e2").status is Status.AMBIGUOUS  # never failed, never left started
    assert get_entry(system, "e1").status is Status.OK
    refused = outsider.record_started(started("e3").request)
    assert isinstance(refused, StaleGeneration) and refused.authority == "ledger"
    assert refused.expected == generations(system)[1]
    assert get_entry(system, "e3") is None
    assert system.ask(RECORDER_PATH, "stamp") == generations(system)  # rebound by rest_for_one
    assert system.ask(RECORDER_PATH, started("e3")).answer == "created"


def test_a_storage_reopen_fences_off_a_writer_of_the_old_storage_generation(system):
    outsider = LedgerWriter(system.context.data_dir, watch=False)
    old_storage, _ = generations(system)
    mark = system.mark()
    ask_authority(system, STORAGE_PATH, Reopen("test"))
    system.wait_for("started", RECORDER_PATH, after=mark)
    refused = outsider.record_started(started("e1").request)
    assert isinstance(refused, StaleGeneration) and refused.authority == "storage"
    assert refused.got == old_storage and refused.expected == generations(system)[0]
    assert system.ask(RECORDER_PATH, started("e1")).answer == "created"


def test_a_killed_recorder_leaves_its_unsettled_starts_ambiguous_at_once(system):
    for effect_id in ("k1", "k2", "k3"):
        system.ask(RECORDER_PATH, started(effect_id))
    system.ask(RECORDER_PATH, settled("k1"))
    assert ask_authority(system, LEDGER_PATH, "status")["watched_writers"] == 1

    kill_and_wait(system, RECORDER_PATH, restarted_last=RECORDER_PATH)

    wait_until(lambda: get_entry(system, "k3").status is Status.AMBIGUOUS, timeout=10.0,
               what="the dead writer's starts to become ambiguous")
    for effect_id in ("k2", "k3"):
        entry = get_entry(system, effect_id)
        assert (entry.status, entry.reason) == (Status.AMBIGUOUS, WRITER_EXITED)
    assert get_entry(system, "k1").status is Status.OK
    # the restarted recorder is watched from its first commit on (its record rides in it); the dead one is forgotten
    status = ask_authority(system, LEDGER_PATH, "status")
    assert (status["watched_writers"], status["gone_writers"]) == (0, 0)
    system.ask(RECORDER_PATH, started("k4"))
    assert ask_authority(system, LEDGER_PATH, "status")["watched_writers"] == 1
    # the ledger itself did not restart: this was found by watching, not by recovery
    assert ask_authority(system, LEDGER_PATH, "status")["recovered_ambiguous"] == 0


@pytest.mark.parametrize("killed", [LEDGER_PATH, STORAGE_PATH])
def test_writes_racing_a_ledger_restart_are_either_recovered_or_refused_never_lost(system, killed):
    """Fencing by the transaction under real concurrency: every start committed before the new
    ledger's recovery is ambiguous after it, every one after is refused, and no third case exists.
    Killing storage restarts the ledger too (rest_for_one), under a new storage generation."""
    writer = LedgerWriter(system.context.data_dir, watch=False)
    answers: dict[str, Any] = {}
    stop = threading.Event()

    def session(k: int) -> None:
        i = 0
        while not stop.is_set():
            effect_id = f"r{k}-{i}"
            answers[effect_id] = writer.record_started(started(effect_id).request)
            if isinstance(answers[effect_id], StaleGeneration):
                return
            i += 1

    threads = [threading.Thread(target=session, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: writer.records >= 40, timeout=30.0, what="writes under way")
        kill_and_wait(system, killed, restarted_last=RECORDER_PATH)
        wait_until(lambda: not any(thread.is_alive() for thread in threads), timeout=30.0,
                   what="every session to be refused")
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    entries = all_entries(system)
    created = {effect_id for effect_id, answer in answers.items() if getattr(answer, "answer", None) == "created"}
    refused = {effect_id for effect_id, answer in answers.items() if isinstance(answer, StaleGeneration)}
    assert created | refused == set(answers), {k: a for k, a in answers.items() if k not in created | refused}
    assert len(refused) == 4 and len(created) >= 40
    assert {effect_id for effect_id in entries if effect_id.startswith("r")} == created
    assert {entries[effect_id].status for effect_id in created} == {Status.AMBIGUOUS}
