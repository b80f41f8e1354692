"""The coordinator's side of :mod:`ouroactors.authorities.session_facts`: a session's facts, from its durable record.

Grants and workspace name :func:`reader` by dotted path (they sit in a lower layer and never import this one); it
reads the record through :class:`.store.SessionStore` (which quarantines a corrupt one) and hands over only the
facts they judge by (:func:`facts_of`).
"""

from __future__ import annotations

import lmdb

from ...authorities.session_facts import ApprovalWait, Facts, Missing, Reader, SessionFacts, Undecodable
from ...core.errors import CorruptRecord
from .record import SessionRecord
from .store import SessionStore
from .workflow import is_terminal

__all__ = ["facts_of", "reader"]


def facts_of(record: SessionRecord) -> SessionFacts:
    """What an authority may know of ``record`` (pure)."""
    waits = tuple(ApprovalWait(w.proposal_digest, w.issued_at_version) for w in record.waits if w.kind == "approval")
    return SessionFacts(record.state.value, is_terminal(record.state), record.state_version, waits)


def reader(env: lmdb.Environment, fence: int | None) -> Reader:
    """A reader of session facts over the node's environment (read only; a corrupt record is quarantined)."""
    store = SessionStore(env, fence=fence)

    def read(session_id: str) -> Facts:
        try:
            record = store.get(session_id)
        except CorruptRecord as exc:
            return Undecodable(str(exc))
        except ValueError:  # not an id a session record can have: no coordinator manages it
            return Missing()
        return Missing() if record is None else facts_of(record)

    return read
