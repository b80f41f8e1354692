"""The commit contract: every durable write answers exactly one of three outcomes.

* ``Committed(value)`` — the transaction is durable (``sync=True`` commit returned).
* ``Rejected(reason)`` — definitely not written: the writer's fence refused it, the map is full,
  or LMDB failed *before* the meta page (EIO/ENOSPC on the data pages; the environment is still
  usable).
* ``Unknown(reason)`` — it may or may not be on disk: the meta-page write failed and the
  environment panicked, or a fault plan said so. Never reported as success or as failure: the
  caller must **reconcile** (read back after the storage restarts) before anything depending on
  it runs. A panicked environment is unusable, so the writer's process must crash and restart.

This module is the only place that interprets LMDB's exceptions. Writers pass a function that
does their puts inside the transaction; if the function itself raises, nothing is written and
the exception propagates (a domain refusal or a bug, not a storage outcome).

**Fencing.** A writer bound to a storage generation passes ``fence=expected_generation``: the
transaction reads the environment's current generation first and is rejected on a mismatch, so a
writer of a gone generation can never commit — enforced inside the transaction, not by a message.

**Fault points** (armed by fault plans): ``storage.before_commit`` and ``storage.after_commit``.
A rule raising :class:`InjectedRejected`, :class:`InjectedMapFull` or :class:`InjectedUnknown`
there makes the outcome that kind; ``InjectedUnknown`` after the commit models a commit that
happened but was not acknowledged, before it one that did not happen — both are ``Unknown``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

import lmdb

from ...core import faults
from .env import GENERATION_KEY, decode_u64, env_panicked, meta_db

T = TypeVar("T")

BEFORE_COMMIT = faults.register_point("storage.before_commit", "a write transaction is about to be committed")
AFTER_COMMIT = faults.register_point("storage.after_commit", "a commit returned, before the writer answers")


# The fault-plan actions commit_rejected / map_full / commit_unknown raise these (also usable as
# ``exception = "ouroactors.authorities.storage.commit:InjectedRejected"`` in a raise rule).
InjectedRejected = faults.InjectedCommitRejected
InjectedMapFull = faults.InjectedMapFull
InjectedUnknown = faults.InjectedCommitUnknown


class EnvironmentDead(Exception):
    """The environment panicked earlier: this process must crash and the storage restart."""


@dataclass(frozen=True)
class Committed(Generic[T]):
    value: T

    kind = "committed"


@dataclass(frozen=True)
class Rejected:
    reason: str

    kind = "rejected"


@dataclass(frozen=True)
class Unknown:
    reason: str

    kind = "commit_outcome_unknown"


Outcome = Committed[T] | Rejected | Unknown


class _Fenced(Exception):
    pass


def write(env: lmdb.Environment, fn: Callable[[lmdb.Transaction], T], *, fence: int | None = None) -> Outcome[T]:
    """Run ``fn`` in one write transaction and commit it, answering the contract's outcome."""
    try:
        faults.point(BEFORE_COMMIT)
    except InjectedRejected as exc:
        return Rejected(f"injected: commit rejected ({exc})")
    except InjectedMapFull:
        return Rejected("map full (injected): the environment's map_size is exhausted")
    except InjectedUnknown as exc:
        return Unknown(f"injected: commit outcome unknown before commit ({exc})")
    try:
        txn = env.begin(write=True)
    except lmdb.PanicError as exc:
        raise EnvironmentDead(f"environment panicked earlier: {exc}") from exc
    try:
        if fence is not None:
            _check_fence(env, txn, fence)
        value = fn(txn)
    except _Fenced as exc:
        txn.abort()
        return Rejected(str(exc))
    except lmdb.MapFullError:
        txn.abort()
        return Rejected("map full: the environment's map_size is exhausted")
    except lmdb.BadValsizeError as exc:  # a key too long or empty: bad input, not a storage failure
        txn.abort()
        return Rejected(f"refused by LMDB, nothing written: {type(exc).__name__}: {exc}")
    except BaseException:
        txn.abort()
        raise
    try:
        txn.commit()
    except lmdb.MapFullError:
        return Rejected("map full during commit: the environment's map_size is exhausted")
    except lmdb.Error as exc:
        if env_panicked(env):
            return Unknown(f"environment panicked during commit (meta page write failed): {exc}")
        return Rejected(f"commit failed before the meta page, nothing written: {exc}")
    try:
        faults.point(AFTER_COMMIT)
    except InjectedUnknown as exc:
        return Unknown(f"injected: commit outcome unknown after commit ({exc})")
    return Committed(value)


@contextlib.contextmanager
def nested(env: lmdb.Environment, txn: lmdb.Transaction, isolate: bool = True) -> Iterator[lmdb.Transaction]:
    """``txn`` itself, or with ``isolate`` a child transaction of it: committed into ``txn`` when the block ends,
    aborted if it raises — so a rider's failed puts leave the transaction it rides in as it was (the ledger's
    riders)."""
    if not isolate:
        yield txn
        return
    child = env.begin(write=True, parent=txn)
    try:
        yield child
    except BaseException:
        child.abort()
        raise
    child.commit()


def _check_fence(env: lmdb.Environment, txn: lmdb.Transaction, expected: int) -> None:
    raw = txn.get(GENERATION_KEY, db=meta_db(env))
    current = decode_u64(raw) if raw is not None else None
    if current != expected:
        raise _Fenced(f"stale storage generation: writer bound to {expected}, environment is at {current}")
