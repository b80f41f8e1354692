"""The workspace authority's protocol: every request it takes, with the bounds checked at its door.

The annotations are the validation (see :mod:`ouroactors.core.boundary`): the worker checks and
rebuilds each request before a handler runs and answers a bad one with
:class:`~ouroactors.core.errors.BadRequest`, changing nothing. Every request must be stamped with
the workspace generation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from ...core.boundary import Address, Name, Range, Size

Path = Annotated[str, Size(1, 4096)]
Mode = Annotated[str, Size(1, 16)]  # exclusive | shared_read (the lease table names a bad one)
Capability = Annotated[bytes, Size(1, 256)]
# The owner's worker generation, when the owner is a worker: the workspace's heartbeats to it go addressed to it
# (``supervision.calls.Addressed``), so whoever holds its port once it died refuses them instead of answering for it.
OwnerGeneration = Annotated[int, Range(1, 2**63 - 1)]


@dataclass(frozen=True)
class Acquire:
    root: Path
    mode: Mode
    session_id: Name
    owner: Address = None  # the actor to watch (default: the sender)
    request_id: Name | None = None  # idempotency key: the same on every retry of this request; unguessable
    owner_generation: OwnerGeneration | None = None  # see OwnerGeneration


@dataclass(frozen=True)
class Release:
    lease_id: Name
    capability: Capability | None = None


@dataclass(frozen=True)
class Reclaim:
    session_id: Name
    root: Path
    mode: Mode
    capability: Capability  # the lost lease's capability: the proof of being that session's owner
    owner: Address = None
    request_id: Name | None = None  # idempotency key of this reclaim (the new lease is keyed by it)
    owner_generation: OwnerGeneration | None = None  # see OwnerGeneration


@dataclass(frozen=True)
class CheckFence:
    path: Path
    token: Annotated[int, Range(0, 2**63 - 1)]
    write: bool = True


@dataclass(frozen=True)
class CreateWorktree:
    repo: Path
    session_id: Name
    base: Annotated[str, Size(1, 200)] = "HEAD"


@dataclass(frozen=True)
class CleanupWorktree:
    """Remove a worktree: asked by its owner (``session_id``, the session that created it) or by an
    operator proven with the grants authority's credentials (``operator`` + ``token``, checked
    against ``<data_dir>/operators.json``). Either way refused while a live lease or reservation
    overlaps the worktree (see :mod:`.worktree_owners`)."""

    repo: Path
    path: Path
    session_id: Name | None = None  # the owner's session (asserted, as in Acquire)
    operator: Name | None = None
    token: Annotated[str, Size(1, 256)] | None = field(default=None, repr=False)  # the operator's; never logged


@dataclass(frozen=True)
class CheckRoot:
    """Would a lease of ``root`` pass the path rules (canonical, an existing directory under an allowed root)?
    Answered with the canonical root, or refused with the :class:`~.paths.PathError` an ``Acquire`` would get.
    A read: nothing is leased or written (the session directory asks it when a session is created)."""

    root: Path


PROTOCOL: tuple[type, ...] = (Acquire, Release, Reclaim, CheckFence, CheckRoot, CreateWorktree, CleanupWorktree)
