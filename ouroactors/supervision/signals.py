"""What goes into a supervisor's pure core and what comes out of it.

The core never sees thespian: its shell translates mailbox traffic into these *inputs* (a child
started, a child's process is gone with a reason, a timer fired, an admin request) and carries out
the *commands* it returns (spawn a child, ask a child to stop, kill a process, arm a timer, reply,
write an event, exit). Children are named by ``key`` (the child id; ``template#n`` for dynamic
children) and a per-supervisor ``incarnation`` number, so a late message about an earlier
incarnation is recognised and ignored — the way OTP ignores an ``'EXIT'`` from an unknown pid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .reasons import ExitReason
from .specs import ChildSpec


@dataclass(frozen=True)
class AuthorityEntry:
    """One authority a child may depend on: an earlier sibling or an ancestor's authority."""

    name: str
    path: str
    address: Any
    generation: int


# -- inputs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Boot:
    """Start the supervisor's static children (OTP's ``init``)."""


@dataclass(frozen=True)
class ChildUp:
    key: str
    incarnation: int
    pid: int | None
    address: Any
    node: str = "local"


@dataclass(frozen=True)
class ChildStartFailed:
    key: str
    incarnation: int
    reason: ExitReason


@dataclass(frozen=True)
class ChildDown:
    """The child's process is gone; ``reason`` is what it reported, or ``killed``."""

    key: str
    incarnation: int
    reason: ExitReason


@dataclass(frozen=True)
class GenerationAnnounced:
    """A running child changed its authority generation without crashing."""

    key: str
    incarnation: int
    cause: str = ""


@dataclass(frozen=True)
class GenerationAdopted:
    """The child took its new generation into use (e.g. wrote it where consumers check it)."""

    NEVER_AN_ANSWER: ClassVar[bool] = True  # child → supervisor, never an answer (see system._answers.tagged_for)

    key: str
    incarnation: int
    generation: int


@dataclass(frozen=True)
class TimerFired:
    token: int


@dataclass(frozen=True)
class TryAgain:
    """A self-message: retry the restart of a child whose restart failed (OTP-9549).

    ``counted`` is False when the message ends a backoff delay: that restart was already counted
    against intensity when the child exited.
    """

    key: str
    tag: int
    counted: bool = True


@dataclass(frozen=True)
class ShutdownRequested:
    """The parent (or the system handle) asks this supervisor to terminate."""

    reason: ExitReason


@dataclass(frozen=True)
class AdminRequest:
    """One admin API call; ``token`` correlates the reply with the caller."""

    token: int
    op: str  # start_child | terminate_child | restart_child | delete_child | which_children | ...
    child_id: str | None = None
    spec: ChildSpec | None = None
    extra_args: tuple[Any, ...] = ()


Input = (
    Boot
    | ChildUp
    | ChildStartFailed
    | ChildDown
    | GenerationAnnounced
    | GenerationAdopted
    | TimerFired
    | TryAgain
    | ShutdownRequested
    | AdminRequest
)


# -- commands -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spawn:
    key: str
    incarnation: int
    generation: int
    spec: ChildSpec
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    snapshot: tuple[AuthorityEntry, ...]
    first: bool = True  # the child's first start (not a restart): a children's fault plan reaches only these


@dataclass(frozen=True)
class RequestStop:
    """Ask a child politely to terminate (OTP's ``exit(Pid, shutdown)``)."""

    key: str
    incarnation: int
    reason: ExitReason


@dataclass(frozen=True)
class Kill:
    """End the child's process at once (OTP's ``exit(Pid, kill)``)."""

    key: str
    incarnation: int


@dataclass(frozen=True)
class SetTimer:
    token: int
    seconds: float
    payload: Any = None


@dataclass(frozen=True)
class SendSelf:
    message: Input


@dataclass(frozen=True)
class ScheduleSelf:
    """Deliver ``message`` to this supervisor after ``seconds`` (a restart backoff)."""

    message: Input
    seconds: float


@dataclass(frozen=True)
class Reply:
    token: int
    result: Any  # a value, or a SupervisorError instance to raise at the caller


@dataclass(frozen=True)
class NewGeneration:
    """Tell a running child its new authority generation."""

    key: str
    incarnation: int
    generation: int


@dataclass(frozen=True)
class Emit:
    """A structured event; the shell adds time, supervisor path and node."""

    kind: str
    child: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BootDone:
    """The supervisor's own start finished: ``failure`` is None on success."""

    failure: ExitReason | None = None


@dataclass(frozen=True)
class ExitSelf:
    """The supervisor terminates with ``reason`` (all its children are already gone)."""

    reason: ExitReason


Command = (
    Spawn | RequestStop | Kill | SetTimer | SendSelf | ScheduleSelf | Reply | NewGeneration | Emit | BootDone | ExitSelf
)
