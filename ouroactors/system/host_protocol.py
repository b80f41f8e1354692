"""What callers outside the system send the tree host (:mod:`.host`) and what it answers.

Kept apart from the host actor itself, which imports the supervisor and the pydantic specs: a process that
only asks a running system which trees it runs (``ouroactors status``, ``tree``) unpickles a
:class:`TreeInfo` without importing any of that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..supervision.protocol import SystemContext
    from ..supervision.reasons import ExitReason
    from ..supervision.specs import ChildSpec

HOST_CLASS = "ouroactors.system.host.TreeHost"  # thespian's name for the class: no import to look it up
HOST_NAME = "ouroactors-host"


@dataclass(frozen=True)
class Configure:
    """Sent once by the handle that started the system: where events go."""

    context: SystemContext
    convention: bool = False


@dataclass(frozen=True)
class StartTree:
    spec: ChildSpec
    context: SystemContext


@dataclass(frozen=True)
class StopTree:
    name: str
    reason: ExitReason


@dataclass(frozen=True)
class ListTrees:
    pass


@dataclass(frozen=True)
class TreeInfo:
    name: str
    address: Any
    pid: int | None
    generation: int
    status: str  # starting | running | stopping | ended
    exit_reason: str | None = None
