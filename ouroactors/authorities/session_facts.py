"""What an authority may know of a session's durable state, read through a port the runtime layer provides.

Two authorities need a session's fate, which only the coordinator records: grants keeps a pending approval across
its own restart only while a durable session still waits on it (:mod:`.grants.orphans`), and workspace releases
the reservation of a session that ended (:meth:`.workspace.actor.Workspace._end_reservations_of_ended_sessions`).
The coordinator sits in a higher layer (DESIGN.md: "a lower layer never imports a higher one"), so the authorities
define here the few facts they read — :class:`SessionFacts` — and name the reader that produces them by dotted path,
loaded when the actor starts (:func:`load_reader`), as the ledger names its reconcilers. The default is the
coordinator's (:data:`DEFAULT_READER`); a tree may name another (the actors' ``session_facts`` keyword).

A reader answers one of three things for a session id, and an authority fails closed on the last two as it sees fit:
the facts; :class:`Missing` (no coordinator manages the session, or the id cannot name one); :class:`Undecodable`
(the record is corrupt — the coordinator's store quarantines it — with what it said).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import lmdb

from ..core.errors import OuroactorsError

__all__ = ["DEFAULT_READER", "ApprovalWait", "Facts", "Missing", "Reader", "ReaderFactory", "SessionFacts",
           "Undecodable", "load_reader"]

DEFAULT_READER = "ouroactors.runtime.coordinator.facts:reader"


@dataclass(frozen=True)
class ApprovalWait:
    """A durable wait of the session on an approval: the call's digest and the state version it was issued at."""

    proposal_digest: str | None
    issued_at_version: int


@dataclass(frozen=True)
class SessionFacts:
    """A session's workflow state (its value, e.g. ``waiting:approval``), whether that state is terminal, its state
    version, and the approval waits it holds."""

    state: str
    terminal: bool
    state_version: int
    approval_waits: tuple[ApprovalWait, ...] = ()


@dataclass(frozen=True)
class Missing:
    """The session has no record: no coordinator manages it (or its id cannot name one)."""


@dataclass(frozen=True)
class Undecodable:
    """The session record does not decode (``detail``: what the store said, naming the record)."""

    detail: str


Facts = SessionFacts | Missing | Undecodable
Reader = Callable[[str], Facts]  # session id -> its facts
ReaderFactory = Callable[[lmdb.Environment, "int | None"], Reader]  # (the node's environment, storage fence)


def load_reader(path: str) -> ReaderFactory:
    """The reader factory named ``module:attribute``; an error naming the path if it cannot be loaded."""
    if not isinstance(path, str):  # a tree's kwarg of another type: said, not an AttributeError
        raise OuroactorsError(f"session_facts: expected 'module:attribute', got {type(path).__name__} {path!r}")
    module, _, attribute = path.partition(":")
    try:
        found = getattr(importlib.import_module(module), attribute) if module and attribute else None
    except (ImportError, AttributeError) as exc:
        raise OuroactorsError(f"session_facts: cannot load {path!r}: {exc}") from None
    if not callable(found):
        raise OuroactorsError(f"session_facts: {path!r} is not a callable 'module:attribute'")
    factory: ReaderFactory = found
    return factory
