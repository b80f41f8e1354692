"""Messages between a supervisor, its children and callers outside the system.

They travel pickled between processes, so they are small frozen dataclasses with no behaviour.
Every message from a child names its ``key`` and ``incarnation``: the supervisor needs no
address lookups (thespian addresses are unhashable and change their string form once a child is
up) and a late message from an earlier incarnation is recognised.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from .calls import AdminAnswer as AdminAnswer  # the answer to an AdminCall that carried a ref
from .calls import AdminCall as AdminCall  # re-exported: the calls a caller outside the system makes
from .calls import Ok as Ok
from .calls import Stamped as Stamped

if TYPE_CHECKING:  # annotations only: a CLI that merely asks a running system does not import pydantic specs
    from .reasons import ExitReason
    from .signals import AuthorityEntry
    from .specs import ChildSpec


@dataclass(frozen=True)
class SystemContext:
    """What every actor of one system needs to know about it."""

    name: str
    base: str  # "multiproc" | "simple"
    data_dir: str
    events_path: str
    node_epoch: int
    origin_ns: int  # time.monotonic_ns() when the system started (system-wide clock on Linux)
    node: str = "local"


@dataclass(frozen=True)
class StartChild:
    """Supervisor → new child: who you are and what you depend on."""

    NEVER_AN_ANSWER: ClassVar[bool] = True  # sent to an actor, never an answer (see system._answers.tagged_for)

    key: str
    incarnation: int
    generation: int
    path: str
    spec: ChildSpec
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    snapshot: tuple[AuthorityEntry, ...]
    context: SystemContext
    is_root: bool = False
    fault_plan: Any = None  # armed by the child itself before it starts (its supervisor's ArmFaults(children=True))


@dataclass(frozen=True)
class ChildStarted:
    NEVER_AN_ANSWER: ClassVar[bool] = True  # child → supervisor, never an answer (see system._answers.tagged_for)

    key: str
    incarnation: int
    pid: int
    address_text: str
    node: str = "local"


def this_node() -> str:
    """The node this process belongs to: inherited from the system that forked it."""
    return os.environ.get("OUROACTORS_NODE", "local")


@dataclass(frozen=True)
class Ping:
    """Supervisor → remote child: are you (and your node) still there? (Also the workspace's and the ledger's
    heartbeat to whoever holds a lease or writes: that may be a system handle, an endpoint outside any actor.)"""

    # Never the answer to an ask: an endpoint outside the actors that owns a lease is pinged between its asks, and
    # the next ask would otherwise take the Ping for its answer (see system._answers.tagged_for).
    NEVER_AN_ANSWER: ClassVar[bool] = True

    key: str
    incarnation: int  # 0: whoever is there (a lease holder's heartbeat); else the one child it is for

    def names_another(self, key: str | None, incarnation: int | None) -> bool:
        """A supervisor's ping names its child: another actor at that address (a dead child's port, bound again)
        must not answer for it, or the dead child would pass for alive. Incarnations count from 1."""
        return self.incarnation != 0 and (self.key, self.incarnation) != (key, incarnation)


@dataclass(frozen=True)
class Pong:
    # The answer to a Ping and nothing else: one a dead supervisor's child (or a lease holder) sent back, reaching a
    # handle endpoint that got the dead actor's port, must not pass for the answer to another ask there.
    ANSWERS_ONLY: ClassVar[tuple[type, ...]] = (Ping,)

    key: str
    incarnation: int


@dataclass(frozen=True)
class ChildStartRefused:
    """The child's start raised (or its supervisor failed to start its own children)."""

    NEVER_AN_ANSWER: ClassVar[bool] = True  # child → supervisor, never an answer (see system._answers.tagged_for)

    key: str
    incarnation: int
    reason: ExitReason


@dataclass(frozen=True)
class StopRequest:
    """Supervisor → child: terminate politely with ``reason``.

    ``key`` and ``incarnation`` name the child it is for: a child killed without its supervisor noticing yet frees
    its port, and whoever the kernel gives that port to would otherwise stop in its place. A request that names
    another child is ignored (None: the sender does not know, as the system host stopping a tree)."""

    NEVER_AN_ANSWER: ClassVar[bool] = True  # sent to an actor, never an answer (see system._answers.tagged_for)

    reason: ExitReason
    key: str | None = None
    incarnation: int | None = None

    def names_another(self, key: str | None, incarnation: int | None) -> bool:
        return self.key is not None and (self.key, self.incarnation) != (key, incarnation)


@dataclass(frozen=True)
class ChildExiting:
    """Child → supervisor: I am done, for this reason; end my process. ``stopped_ns``: when the child stopped handling
    messages (``time.monotonic_ns()``), which its end's event carries for the handles (see
    :meth:`~.processes.ChildProcesses._note_report`); None from a child that does not say."""

    NEVER_AN_ANSWER: ClassVar[bool] = True  # child → supervisor, never an answer (see system._answers.tagged_for)

    key: str
    incarnation: int
    reason: ExitReason
    stopped_ns: int | None = None


@dataclass(frozen=True)
class AnnounceGeneration:
    """Authority → its supervisor: my generation changed without a crash."""

    NEVER_AN_ANSWER: ClassVar[bool] = True  # child → supervisor, never an answer (see system._answers.tagged_for)

    key: str
    incarnation: int
    cause: str


@dataclass(frozen=True)
class GenerationAssigned:
    generation: int


@dataclass(frozen=True)
class ArmFaults:
    """Arm (or with ``plan=None`` disarm) a fault plan in the receiving actor's process.

    ``children`` (a supervisor only): not here but in each child the supervisor starts from now on, at that child's
    first start (a dynamic child ``start_child`` adds, a child started again by ``restart_child`` after a
    ``terminate``... not a restart after a crash, which runs free: a plan that killed a child must not kill each of its
    restarts too); it arms the plan itself as it starts. ``plan=None`` there forgets the plan."""

    plan: Any
    children: bool = False


@dataclass(frozen=True)
class Loopback:
    """A supervisor's message to itself (OTP's ``try_again_restart`` cast)."""

    payload: Any


@dataclass(frozen=True)
class TimerPayload:
    token: int
    owner: int = field(default=0)


class _Ignore:
    """The type of :data:`IGNORE` (a worker's ``on_start`` returns it: OTP's ``ignore``)."""

    def __repr__(self) -> str:
        return "IGNORE"

    def __reduce__(self) -> str:
        return "IGNORE"  # one object per process, also after pickling


IGNORE = _Ignore()  # returned by ``on_start``: see :meth:`~.worker.Worker.on_start`


def requirements_met(capabilities: dict[str, Any], requirements: dict[str, Any] | None) -> bool:
    """Placement: every required capability must be present with the same value."""
    return all(capabilities.get(key) == value for key, value in (requirements or {}).items())
