"""The store's refusals: raised inside the write transaction, so nothing was written."""

from __future__ import annotations

from ...core.errors import OuroactorsError

__all__ = ["NotOwner", "RevisionConflict", "SessionExists", "UnknownSession"]


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
