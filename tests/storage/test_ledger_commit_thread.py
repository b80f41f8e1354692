"""The ledger's commit thread: whole transactions on its own OS thread, signalled through a pipe;
and, with real processes, group commits whose answers all follow their commit."""

from __future__ import annotations

import select
import threading
import time
from typing import Any

import pytest

from ouroactors import supervisor, worker
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.ledger.actor import (
    GetEntry,
    LedgerAnswer,
    RecordBatch,
    RecordSettled,
    RecordStarted,
)
from ouroactors.authorities.ledger.committer import CommitThread
from ouroactors.authorities.ledger.domain import Created, Status
from ouroactors.authorities.ledger.store import LedgerStore, Start
from ouroactors.authorities.storage.commit import Committed
from ouroactors.core.errors import CommitRejected
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.supervision.protocol import Stamped

from .test_ledger_store import make_store
from .workers import start_request

LEDGER = "agent/ledger"


# -- the thread on its own (a real environment, no thespian) -------------------------------------------


def test_a_job_runs_whole_on_the_commit_thread_and_signals_the_pipe(env):
    store = make_store(env)
    threads: list[int] = []

    def apply(ops: list[Any]) -> Any:
        threads.append(threading.get_ident())
        return store.apply(ops)

    writer = CommitThread(apply)
    try:
        assert writer.poll() is None and writer.poll_done() is None  # nothing submitted yet
        writer.submit([Start(start_request("a")), Start(start_request("b"))])
        assert select.select([writer.fd], [], [], 10)[0] == [writer.fd]  # the signal
        outcome, exc = writer.poll() or (None, None)
        assert exc is None and isinstance(outcome, Committed)
        assert [type(result) for result in outcome.value] == [Created, Created]
        assert writer.poll() is None  # one job, one result: the pipe was drained with it
        writer.submit([Start(start_request("c"))])
        outcome, exc = writer.wait()
        assert isinstance(outcome, Committed) and outcome.value[0].entry.seq == 3
    finally:
        writer.close()
    assert threads and set(threads) != {threading.get_ident()} and len(set(threads)) == 1
    assert [entry.effect_id for entry in make_store(env).list()] == ["a", "b", "c"]  # durable, in order


def test_an_exception_in_the_job_is_handed_back_not_lost(env):
    def apply(ops: list[Any]) -> Any:
        raise RuntimeError("the environment died")

    writer = CommitThread(apply)
    try:
        writer.submit([])
        outcome, exc = writer.wait()
        assert outcome is None and isinstance(exc, RuntimeError) and "died" in str(exc)
        writer.submit([])  # the thread is still there for the next job
        assert isinstance(writer.wait()[1], RuntimeError)
    finally:
        writer.close()


def test_closing_ends_the_thread(env):
    writer = CommitThread(make_store(env).apply)
    thread = writer._thread
    writer.close()
    assert not thread.is_alive()


# -- in the ledger actor (real processes) ----------------------------------------------------------------


def tree(**ledger_kwargs: Any) -> Any:
    return supervisor("agent", strategy="rest_for_one", children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "ouroactors.authorities.ledger.actor:Ledger",
               **({"kwargs": ledger_kwargs} if ledger_kwargs else {})),
    ])


def record_concurrently(system: Any, senders: int, per_sender: int) -> list[list[Any]]:
    address = system.resolve(LEDGER)
    generation = system.child_info(LEDGER).generation
    answers: list[list[Any]] = [[] for _ in range(senders)]
    go = threading.Barrier(senders)

    def run(k: int) -> None:
        with system._thespian.private() as endpoint:
            go.wait()
            for i in range(per_sender):
                request = RecordStarted(start_request(f"s{k}-{i}", session=f"s{k}"))
                answers[k].append(endpoint.ask(address, Stamped(generation, request), 30))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return answers


@pytest.mark.multiproc
@pytest.mark.parametrize("commit_thread", [True, False])
def test_many_sessions_share_commits_and_every_answer_is_a_committed_entry(actor_system, commit_thread):
    actor_system.start_tree(tree(commit_thread=commit_thread))
    senders, per_sender = 12, 15
    answers = record_concurrently(actor_system, senders, per_sender)
    flat = [answer for per in answers for answer in per]
    assert len(flat) == senders * per_sender
    assert all(isinstance(answer, LedgerAnswer) and answer.answer == "created" for answer in flat), flat
    assert sorted(answer.entry.seq for answer in flat) == list(range(1, senders * per_sender + 1))
    for k, per in enumerate(answers):  # each session's records in the order it made them
        assert [answer.entry.effect_id for answer in per] == [f"s{k}-{i}" for i in range(per_sender)]
        assert [answer.entry.seq for answer in per] == sorted(answer.entry.seq for answer in per)
    status = ask_authority(actor_system, LEDGER, "status")
    assert status["counts"] == {"started": senders * per_sender}
    group = status["group_commit"]
    assert group["thread"] is commit_thread
    assert (group["handed_over"] > 0) is commit_thread  # 12 sessions: the actor thread had work meanwhile
    assert group["records"] == senders * per_sender
    assert 0 < group["transactions"] <= group["records"]
    for answer in flat[:: max(1, len(flat) // 10)]:  # what was answered is what is stored
        assert ask_authority(actor_system, LEDGER, GetEntry(answer.entry.effect_id)) == answer.entry


@pytest.mark.multiproc
def test_an_answer_waits_for_its_commit_and_later_requests_share_the_next(actor_system):
    """A slow commit: its caller waits for it; requests that arrive meanwhile are committed
    together after it, each answered with its own entry."""
    actor_system.start_tree(tree())
    ask_authority(actor_system, LEDGER, RecordStarted(start_request("warm")))
    actor_system.arm_faults(LEDGER, FaultPlan((
        FaultRule("storage.before_commit", FaultAction.DELAY, nth=1, delay_s=1.0),
    )))
    address = actor_system.resolve(LEDGER)
    generation = actor_system.child_info(LEDGER).generation
    answers: dict[str, Any] = {}
    took: dict[str, float] = {}

    def ask(name: str, message: Any) -> None:
        with actor_system._thespian.private() as endpoint:
            began = time.monotonic()
            answers[name] = endpoint.ask(address, Stamped(generation, message), 30)
            took[name] = time.monotonic() - began

    slow = threading.Thread(target=ask, args=("slow", RecordStarted(start_request("slow"))))
    slow.start()
    time.sleep(0.3)  # the slow one is in its commit now
    others = [threading.Thread(target=ask, args=(f"o{i}", RecordBatch((RecordStarted(start_request(f"o{i}")),
                                                                      RecordSettled(f"o{i}", "ok")))))
              for i in range(3)]
    for thread in others:
        thread.start()
    for thread in [slow, *others]:
        thread.join(30)
    assert isinstance(answers["slow"], LedgerAnswer) and took["slow"] >= 0.9  # not before its commit
    for i in range(3):
        started, settled = answers[f"o{i}"]
        assert started.answer == settled.answer == "created" and settled.entry.status is Status.OK
    assert ask_authority(actor_system, LEDGER, GetEntry("slow")).seq == 2
    group = ask_authority(actor_system, LEDGER, "status")["group_commit"]
    assert group["records"] == 1 + 1 + 6 and group["transactions"] < group["records"]


@pytest.mark.multiproc
def test_stopping_with_a_commit_in_flight_answers_it(actor_system):
    """The ledger is stopped while its commit thread is inside a (delayed) commit: the caller still
    gets that commit's outcome — never silence — and what it was told is what is stored."""
    actor_system.start_tree(tree())
    actor_system.arm_faults(LEDGER, FaultPlan((
        FaultRule("storage.before_commit", FaultAction.DELAY, nth=1, delay_s=1.0),
    )))
    address = actor_system.resolve(LEDGER)
    generation = actor_system.child_info(LEDGER).generation
    answers: list[Any] = []

    def record() -> None:
        with actor_system._thespian.private() as endpoint:
            answers.append(endpoint.ask(address, Stamped(generation, RecordStarted(start_request("inflight"))), 30))

    thread = threading.Thread(target=record)
    thread.start()
    time.sleep(0.3)
    actor_system.terminate_child("agent", "ledger")
    thread.join(30)
    actor_system.restart_child("agent", "ledger")
    assert len(answers) == 1
    answer = answers[0]
    stored = ask_authority(actor_system, LEDGER, GetEntry("inflight")) if isinstance(answer, LedgerAnswer) else None
    if isinstance(answer, LedgerAnswer):
        assert stored is not None and stored.effect_id == "inflight"  # (ambiguous after the restart)
    else:
        assert isinstance(answer, CommitRejected), answer


def test_the_store_used_by_the_thread_is_the_one_the_actor_reads(env):
    """Guard for the design: one store object, one environment handle, shared by both threads."""
    store = make_store(env)
    writer = CommitThread(store.apply)
    try:
        writer.submit([Start(start_request("x"))])
        assert isinstance(writer.wait()[0], Committed)
    finally:
        writer.close()
    assert isinstance(store, LedgerStore) and store.get("x") is not None
