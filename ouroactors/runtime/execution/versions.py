"""Workflow versions: which orchestration a session runs under, and the guard on continuing it.

A session's turns are decided by the turn loop (:mod:`.loop`): how a request is built from the conversation,
when tools run, what a settled turn records. Code that decides differently from the same history is another
*workflow version*; continuing a session recorded under one with code of another would silently change what its
history means (the replay corpus, ``tests/data/journals``, is what notices such a change). So a session pins the
version it was created under (the session config's ``pins.workflow``, resolved at creation: ``default`` becomes
:data:`WORKFLOW`) and only code that provides that version continues it — the coordinator refuses a message to a
session pinned to a version it does not provide, recovery parks such a session with the reason, and a runtime
refuses to open it (:class:`WorkflowUnavailable`). A session created before versions were pinned says
``default`` and is continued by the current version.

When the loop changes what it would decide, bump :data:`WORKFLOW`; keep the old version in :data:`PROVIDED` only
if this code still continues its sessions correctly.
"""

from __future__ import annotations

from .errors import RuntimeRefusal

# 2: a tool call whose outcome is unknown ends the turn (``ambiguous``) instead of asking the model again. Sessions of
# version 1 are still continued: their journals replay the same under this code unless a turn of theirs met an
# unknown outcome and went on — and such a journal's replay diverges, so its runtime refuses it, naming the seq.
WORKFLOW = "turn-loop/2"  # the version this code's loop is
PROVIDED: tuple[str, ...] = (WORKFLOW, "turn-loop/1")  # the versions this code continues
DEFAULT = "default"


class WorkflowUnavailable(RuntimeRefusal):
    """A session is pinned to a workflow version this code does not provide."""

    def __init__(self, session_id: str, pinned: str, provided: tuple[str, ...]) -> None:
        self.session_id, self.pinned, self.provided = session_id, pinned, provided
        super().__init__(f"session {session_id!r} is pinned to workflow {pinned!r}; this runtime provides "
                         f"{', '.join(repr(p) for p in provided)}: continue it with a version that provides it")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.session_id, self.pinned, self.provided))


def resolve(pinned: str) -> str:
    """The version a pin names (``default``: this code's)."""
    return WORKFLOW if pinned == DEFAULT else pinned


def provides(pinned: str) -> bool:
    return pinned == DEFAULT or pinned in PROVIDED


def check(session_id: str, pinned: str) -> str:
    """The resolved version, or :class:`WorkflowUnavailable`."""
    if not provides(pinned):
        raise WorkflowUnavailable(session_id, pinned, PROVIDED)
    return resolve(pinned)


__all__ = ["DEFAULT", "PROVIDED", "WORKFLOW", "WorkflowUnavailable", "check", "provides", "resolve"]
