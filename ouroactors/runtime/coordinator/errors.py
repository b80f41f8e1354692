"""The store's refusals (raised inside the write transaction, so nothing was written), and what a command's caller
hears when its coordinator crashes on one (:func:`crash_answer`)."""

from __future__ import annotations

from ...core.errors import ActorCrashed, OuroactorsError

__all__ = ["CursorAhead", "NotOwner", "RevisionConflict", "SessionExists", "UnknownSession", "crash_answer"]


class SessionExists(OuroactorsError):
    def __init__(self, session_id: str, detail: str = "exists already") -> None:
        self.session_id, self.detail = session_id, detail
        super().__init__(f"session {session_id!r} {detail}")

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.session_id, self.detail))


class UnknownSession(OuroactorsError):
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"no session {session_id!r}")


class CursorAhead(OuroactorsError):
    """A read of a session's events after a cursor beyond its committed one: bad input, refused. Read from there, the
    events between the committed cursor and the one given would never be shown — the next ones committed take
    exactly those cursors (a cursor from another data dir, or from before a restore, is the usual cause)."""

    def __init__(self, session_id: str, after: int, committed: int) -> None:
        self.session_id, self.after, self.committed = session_id, after, committed
        super().__init__(f"session {session_id!r}: cursor {after} is beyond its committed cursor {committed}: "
                         f"events are read after a cursor from 0 to {committed} (the events committed next take "
                         f"cursors {committed + 1}, {committed + 2}, …)")

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.session_id, self.after, self.committed))


class RevisionConflict(OuroactorsError):
    """Another writer moved the session since the caller read it: stop, do not retry."""

    def __init__(self, session_id: str, expected: int, found: int) -> None:
        self.session_id, self.expected, self.found = session_id, expected, found
        super().__init__(f"session {session_id!r}: expected revision {expected}, found {found} "
                         "(another coordinator wrote it; this one must stop)")

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.session_id, self.expected, self.found))


class NotOwner(OuroactorsError):
    def __init__(self, session_id: str, holder: str, caller: str) -> None:
        self.session_id, self.holder, self.caller = session_id, holder, caller
        super().__init__(f"session {session_id!r} is claimed by coordinator {holder!r}, not {caller!r}")

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.session_id, self.holder, self.caller))


def crash_answer(path: str, exc: Exception) -> OuroactorsError:
    """What the caller of a command hears when the coordinator crashes handling it: typed, as a worker's crash is
    answered (a raw ``KeyError``, or one that does not unpickle, is no answer). Losing the session's record to another
    coordinator (``RevisionConflict``, ``NotOwner``: the restarted directory's sweep started a second one while this
    one handled the command) is this coordinator's crash too, and the caller is told what to do about it, not handed
    the store's internal conflict."""
    if isinstance(exc, RevisionConflict | NotOwner):
        return ActorCrashed(path, f"another coordinator took the session over while this one handled the command "
                                  f"({exc}); it may or may not have been taken: send it again with its event id")
    return exc if isinstance(exc, OuroactorsError) else ActorCrashed(path, repr(exc)[:500])
