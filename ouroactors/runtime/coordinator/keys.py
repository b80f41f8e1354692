"""Where the coordinator's records live in LMDB: the key of each (fixed shapes, no overlap between sessions).

Identifiers are checked by :func:`~.record.check_id` (no ``/``, no NUL), so ``node/`` and
``session/`` prefixes can never overlap another node's or session's range; sequences and times are
8-byte big-endian, so bytewise key order is numeric order.
"""

from __future__ import annotations

from ...core.codec import seq_key
from .record import check_id

__all__ = ["live_key", "log_prefix", "rejected_count_key", "rejected_prefix", "seen_key", "seen_prefix",
           "timer_key"]


def live_key(node: str, session_id: str) -> bytes:
    """``sessions_live``: the boot sweep's projection, per node."""
    return f"{node}/{session_id}".encode()


def timer_key(due_ns: int, session_id: str) -> bytes:
    """``session_timers``: due time first, so a scan up to a clock reading stops at the first future one."""
    return seq_key(due_ns) + session_id.encode()


def log_prefix(session_id: str) -> bytes:
    """``session_events``: ``session/`` + 8-byte cursor."""
    return check_id(session_id, "session_id").encode() + b"/"


def rejected_prefix(session_id: str) -> bytes:
    """``session_resume``: ``session/r/`` + 8-byte sequence (the rejected-events log)."""
    return check_id(session_id, "session_id").encode() + b"/r/"


def rejected_count_key(session_id: str) -> bytes:
    return check_id(session_id, "session_id").encode() + b"/n"


def seen_prefix(session_id: str) -> bytes:
    """``session_resume``: ``session/s/``, before the id of each accepted event of the session."""
    return check_id(session_id, "session_id").encode() + b"/s/"


def seen_key(session_id: str, event_id: str) -> bytes:
    """``session_resume``: ``session/s/<event id>`` → the accepted event (duplicates are found here)."""
    return seen_prefix(session_id) + check_id(event_id, "event_id").encode()
