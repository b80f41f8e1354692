"""Several processes writing one ledger: LMDB serialises the writers, every commit answers truthfully
and sequences stay unique (each process opens the environment itself; 'spawn', never fork)."""

from __future__ import annotations

import multiprocessing
from collections import Counter

from ouroactors.authorities.ledger.domain import Status

from .test_ledger_store import make_store
from .workers import ledger_writer_when_told

PROCESSES = 4
PER_PROCESS = 200
TIMEOUT_S = 120


def test_four_processes_recording_concurrently(env, config):
    ctx = multiprocessing.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    sessions = [f"s{i}" for i in range(PROCESSES)]
    children = [ctx.Process(target=ledger_writer_when_told, args=(config, session, PER_PROCESS, ready, go, results))
                for session in sessions]
    for child in children:
        child.start()
    try:
        assert sorted(ready.get(timeout=TIMEOUT_S) for _ in children) == sessions
        go.set()  # all spawned and imported: start writing together
        answers = {}
        for _ in children:
            session, outcomes, seqs = results.get(timeout=TIMEOUT_S)
            answers[session] = (outcomes, seqs)
    finally:
        for child in children:
            child.join(TIMEOUT_S)
            if child.is_alive():
                child.kill()
                child.join()
    assert [child.exitcode for child in children] == [0] * PROCESSES

    for session in sessions:
        outcomes, seqs = answers[session]
        assert isinstance(outcomes, list), outcomes  # a string is the child's exception
        assert Counter(outcomes) == {"Committed:Created": 2 * PER_PROCESS}, session
        assert seqs == sorted(seqs) and len(set(seqs)) == PER_PROCESS  # its own seqs grow

    store = make_store(env)
    entries = store.list(limit=10 * PROCESSES * PER_PROCESS)
    assert len(entries) == PROCESSES * PER_PROCESS
    assert [entry.seq for entry in entries] == list(range(1, PROCESSES * PER_PROCESS + 1))
    all_seqs = sorted(seq for _, seqs in answers.values() for seq in seqs)
    assert all_seqs == [entry.seq for entry in entries]  # what each process was told is what is stored
    for session in sessions:
        mine = store.list(session=session, limit=10 * PER_PROCESS)
        assert {entry.effect_id for entry in mine} == {f"{session}-{i}" for i in range(PER_PROCESS)}
        for entry in mine:
            i = int(entry.effect_id.rsplit("-", 1)[1])
            assert entry.status is (Status.OK if i % 2 else Status.FAILED)
            assert entry.evidence == {"i": i} and entry.node == f"node-{session}"
    assert store.counts() == {"ok": PROCESSES * PER_PROCESS // 2, "failed": PROCESSES * PER_PROCESS // 2}
