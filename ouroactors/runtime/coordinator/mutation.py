"""How a session record may change from one revision to the next (pure; the store calls it inside its txn).

Whatever a caller hands the store — a transition's changes, an ``update`` function's result, a
checkpoint — the new record passes these rules before it is written, so a bug or a hostile caller
cannot make the durable record say something the design forbids:

* the session id and the creation time are fixed; the revision is the old one + 1 (set here);
* the state and state version change only by a transition of the table (:func:`moved`);
* only a checkpoint moves the committed cursor and the digests, and the cursor never goes back (a runtime's
  carried checkpoint, :meth:`~.store.SessionStore.put_carried`, moves the cursor and log digest alone, fenced by
  :func:`~.publication.carry` in its own transaction, and leaves the revision: the revision is the coordinator's
  compare-and-set token, and every write of the coordinator's starts from the durable record, carried cursor
  included);
* a waiting session has a pending wait of its kind, a session that does not wait has none;
* only a running or recovering session names a runtime, and a runtime newly attached has a
  generation above every one attached before (``last_generation`` only grows): a generation is
  never reused, so a zombie of a gone generation can never be mistaken for the current runtime.
"""

from __future__ import annotations

from typing import Any

from ...core.generation_text import format_generation
from .record import SessionRecord
from .workflow import Event, State, apply, holds_runtime

__all__ = ["InvalidChange", "check_shape", "check_step", "moved", "next_record"]

_TRANSITION_FIELDS = ("state", "state_version", "revision", "session_id")
_CHECKPOINT_FIELDS = ("committed_cursor", "log_digest", "conversation_digest")


class InvalidChange(ValueError):
    """A change the record's rules forbid; nothing was written."""


def moved(record: SessionRecord, event: Event, changes: dict[str, Any]) -> SessionRecord:
    """``record`` after the transition ``event`` and ``changes`` (the runtime and waits follow the state)."""
    for name in _TRANSITION_FIELDS:
        if name in changes:
            raise InvalidChange(f"a transition sets {name} itself")
    state, version = apply(record.state, record.state_version, event)
    update: dict[str, Any] = {"state": state, "state_version": version, **changes}
    if state.wait is None:
        update["waits"] = ()  # only a waiting session waits on anything
    if not holds_runtime(state) and state is not State.RECOVERING:
        update["runtime"] = None  # suspended, waiting, parked and terminal sessions hold no runtime
    return SessionRecord.model_validate({**dict(record), **update})


def check_shape(record: SessionRecord) -> None:
    """The invariants a record must hold whatever wrote it."""
    wait = record.state.wait
    if wait is not None and not any(w.kind == wait for w in record.waits):
        raise InvalidChange(f"a session in {record.state.value} needs a pending {wait} wait")
    if wait is None and record.waits:
        raise InvalidChange(f"a session in {record.state.value} waits on nothing")
    if record.runtime is not None:
        if record.state not in (State.RUNNING, State.RECOVERING):
            raise InvalidChange(f"a session in {record.state.value} holds no runtime")
        if record.runtime.generation > record.last_generation:
            raise InvalidChange(f"runtime generation {format_generation(record.runtime.generation)} is above the last "
                                f"generation {format_generation(record.last_generation)}: raise last_generation with "
                                "the attachment")


def check_step(old: SessionRecord, new: SessionRecord, *, checkpoint: bool = False) -> None:
    """Refuse a step from ``old`` to ``new`` that the rules in the module docstring forbid."""
    if new.session_id != old.session_id:
        raise InvalidChange(f"a session's id is fixed ({old.session_id!r} -> {new.session_id!r})")
    if new.created_ns != old.created_ns:
        raise InvalidChange("a session's creation time is fixed")
    if not checkpoint and any(getattr(new, f) != getattr(old, f) for f in _CHECKPOINT_FIELDS):
        raise InvalidChange("only a checkpoint moves the committed cursor and the digests")
    if new.committed_cursor < old.committed_cursor:
        raise InvalidChange(f"the committed cursor never goes back ({old.committed_cursor} -> {new.committed_cursor})")
    if new.last_generation < old.last_generation:
        raise InvalidChange(f"last_generation never goes back ({format_generation(old.last_generation)} -> "
                            f"{format_generation(new.last_generation)})")
    if new.runtime is not None and new.runtime != old.runtime and new.runtime.generation <= old.last_generation:
        raise InvalidChange(f"runtime generation {format_generation(new.runtime.generation)} was used before (last "
                            f"{format_generation(old.last_generation)}): a replacement gets a fresh generation")
    check_shape(new)


def next_record(old: SessionRecord, new: SessionRecord, now_ns: int, *, checkpoint: bool = False) -> SessionRecord:
    """``new`` checked against ``old``, at revision ``old.revision + 1``, updated at ``now_ns``."""
    check_step(old, new, checkpoint=checkpoint)
    return SessionRecord.model_validate({**dict(new), "revision": old.revision + 1, "updated_ns": now_ns})
