"""Functions run in child processes (importable by the 'spawn' context; not tests themselves)."""

from __future__ import annotations

from typing import Any

from ouroactors.authorities.ledger.domain import DEFAULT_KINDS, Created, StartRequest, fingerprint
from ouroactors.authorities.ledger.store import LedgerStore, Settle, Start
from ouroactors.authorities.storage.commit import Committed, write
from ouroactors.authorities.storage.env import StorageConfig, StorageError, close_env, db, open_env


def start_request(effect_id: str, *, session: str | None = None, kind: str = "example",
                  args: Any = None) -> StartRequest:
    return StartRequest(
        effect_id=effect_id, kind=kind, idempotency_key=f"idem-{effect_id}"[:200],
        fingerprint=fingerprint(kind, args if args is not None else {"id": effect_id}),
        principal="tester", session_id=session,
    )


def open_in_child(config: StorageConfig, results: Any) -> None:
    """Try to open (and use) ``config`` in this process; report what happened on ``results``."""
    try:
        env = open_env(config)
    except StorageError as exc:
        results.put(("StorageError", str(exc)))
        return
    except Exception as exc:  # anything else is a failure the test reports
        results.put((type(exc).__name__, str(exc)))
        return
    outcome = write(env, lambda txn: txn.put(b"from-child", b"hello", db=db(env, b"grants")))
    close_env(config)
    results.put(("opened", type(outcome).__name__))


def _describe(outcome: Any) -> str:
    if isinstance(outcome, Committed):
        return "Committed:" + ",".join(type(result).__name__ for result in outcome.value)
    return repr(outcome)


def ledger_writer(config: StorageConfig, session: str, count: int) -> tuple[list[str], list[int]]:
    """Record ``count`` starts and settles (one commit each) for ``session``; answer outcomes and seqs."""
    env = open_env(config)
    try:
        store = LedgerStore(env, node=f"node-{session}", kinds=DEFAULT_KINDS, fence=None)
        outcomes: list[str] = []
        seqs: list[int] = []
        for i in range(count):
            effect_id = f"{session}-{i}"
            started = store.apply([Start(start_request(effect_id, session=session))])
            outcomes.append(_describe(started))
            if isinstance(started, Committed) and isinstance(started.value[0], Created):
                seqs.append(started.value[0].entry.seq)
            settled = store.apply([Settle(effect_id, "ok" if i % 2 else "failed", evidence={"i": i})])
            outcomes.append(_describe(settled))
        return outcomes, seqs
    finally:
        close_env(config)


def ledger_writer_when_told(config: StorageConfig, session: str, count: int, ready: Any, go: Any,
                            results: Any) -> None:
    """:func:`ledger_writer` started together with its siblings (``go``), answering on ``results``."""
    ready.put(session)
    if not go.wait(60):
        results.put((session, "never told to go", []))
        return
    try:
        outcomes, seqs = ledger_writer(config, session, count)
    except Exception as exc:
        results.put((session, f"{type(exc).__name__}: {exc}", []))
        return
    results.put((session, outcomes, seqs))


def direct_writer_child(data_dir: str, effect_ids: list[str], results: Any) -> None:
    """Record ``effect_ids`` as started through a watched direct writer, settle the first, report, then
    wait to be killed (the test kills this process with its other starts unsettled)."""
    import threading

    from ouroactors.authorities.ledger.direct import LedgerWriter

    writer = LedgerWriter(data_dir)
    answers = [writer.record_started(start_request(effect_id)).answer for effect_id in effect_ids]
    answers.append(writer.record_settled(effect_ids[0], "ok").entry.status.value)
    results.put(answers)
    threading.Event().wait()
