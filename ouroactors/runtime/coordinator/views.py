"""How a session record is shown to a user (:class:`~.messages.SessionView`), in one place.

The view carries the record's "next valid transitions" (seed 001) as the events the workflow table declares
from its state: derived, not stored, so the durable record cannot disagree with the table that judges every
move (the pinned workflow version names that table).
"""

from __future__ import annotations

from .messages import SessionView
from .record import SessionRecord
from .workflow import allowed_events


def view_of(record: SessionRecord, rejections: int = 0) -> SessionView:
    runtime = record.runtime
    return SessionView(session_id=record.session_id, state=record.state.value, state_version=record.state_version,
                       revision=record.revision, committed_cursor=record.committed_cursor,
                       runtime_id=runtime.runtime_id if runtime else None,
                       generation=runtime.generation if runtime else None, reason=record.reason,
                       principal=record.principal, updated_ns=record.updated_ns, rejections=rejections,
                       waits=tuple(f"{w.kind} {w.wait_id}" + (f" due_ns={w.due_ns}" if w.due_ns is not None else "")
                                   for w in record.waits),
                       pinned=dict(record.pinned.__dict__),
                       next_events=tuple(event.value for event in allowed_events(record.state)))


__all__ = ["view_of"]
