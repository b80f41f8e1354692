"""Child specs and supervisor flags: the one description of a supervision tree.

A tree is a :class:`ChildSpec` of ``type = "supervisor"`` whose ``children`` are child specs
again, so a tree written in Python (with :func:`worker` / :func:`supervisor`) and the same tree
loaded from TOML are the same objects and compare equal.

Validation follows OTP's ``check_childspec`` and ``check_flags`` rule for rule and goes further
where OTP is lenient: unknown keys are refused instead of ignored (a typo in a supervision tree
must not pass silently), an actor path must import before anything starts and name a class of the
kind its child's ``type`` needs (a Worker subclass for a worker, a Supervisor subclass for a
supervisor), and every duration that becomes a timer (``start_timeout``, a timed ``shutdown``, the
longest ``backoff`` delay) is at most :data:`MAX_TIMER_S` (24 days). Every problem is reported with
its key path (``children[2].restart``) and the allowed values.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..core.errors import SpecError
from .actor_paths import kind_problem, loaded_actor, resolve_actor
from .calls import MAX_CHILD_ID_CHARS
from .spec_arguments import arguments_problems, judged
from .spec_errors import SHUTDOWN_RULE, format_location, several
from .spec_errors import spec_error_from as _spec_error_from

SUPERVISOR_ACTOR = "ouroactors.supervision.supervisor:Supervisor"
DEFAULT_WORKER_SHUTDOWN_MS = 5000
DEFAULT_REMOTE_START_TIMEOUT_S = 30.0
# The longest duration that becomes a timer. thespian's timers and the poll timeout under them hold milliseconds in a
# C int: past 2**31-1 ms (~24.86 days) a start timeout never fires or an actor's loop dies (1e308 s overflows
# outright). A round 24 days stays below it; "infinity" is the way to say "no limit".
MAX_TIMER_S = 24 * 24 * 3600  # 2,073,600 s
MAX_TIMER_MS = MAX_TIMER_S * 1000


def check_child_id(value: str) -> str:
    """``value`` if it can name a child, else ValueError saying why.

    A child is addressed by its path (``app/sessions/session#3``): an id holding ``/`` would make two actors answer
    to one path, and the one whose id holds it could never be reached (``app/a/b`` is ``b`` under ``a``). Ids are
    printed by the CLI and written to the event log, so a control character (an escape sequence, a newline that
    forges an event line) or blanks around it (a typo nobody sees) are refused too.
    """
    if "/" in value:
        raise ValueError(f"{value!r} holds '/', which separates the parts of a path (app/store): an id cannot hold one")
    if not value.isprintable():
        raise ValueError(f"{value!r} holds a character that is not printable (a control character or a line break)")
    if value != value.strip():
        raise ValueError(f"{value!r} begins or ends with a blank")
    if len(value) > MAX_CHILD_ID_CHARS:
        raise ValueError(f"must be 1 to {MAX_CHILD_ID_CHARS} characters, not {len(value)}")
    return value


class Strategy(str, Enum):
    ONE_FOR_ONE = "one_for_one"
    ONE_FOR_ALL = "one_for_all"
    REST_FOR_ONE = "rest_for_one"
    SIMPLE_ONE_FOR_ONE = "simple_one_for_one"


class RestartType(str, Enum):
    PERMANENT = "permanent"
    TRANSIENT = "transient"
    TEMPORARY = "temporary"


class ChildType(str, Enum):
    WORKER = "worker"
    SUPERVISOR = "supervisor"


class AutoShutdown(str, Enum):
    NEVER = "never"
    ANY_SIGNIFICANT = "any_significant"
    ALL_SIGNIFICANT = "all_significant"


Shutdown = int | Literal["brutal_kill", "infinity"]


class Backoff(BaseModel):
    """Delay between automatic restarts of one child (beyond OTP; applied on top of intensity)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_s: float = Field(0.1, ge=0, allow_inf_nan=False)
    max_s: float = Field(10.0, ge=0, allow_inf_nan=False)
    jitter: float = Field(0.1, ge=0, le=1)
    reset_after_s: float | None = Field(None, gt=0)  # compared with how long a child ran: no timer

    @model_validator(mode="after")
    def _min_le_max(self) -> Backoff:
        if self.max_s < self.min_s:
            raise ValueError(f"max_s ({self.max_s}) must be >= min_s ({self.min_s})")
        longest = self.max_s * (1 + self.jitter)  # a delay becomes a timer: see decisions.backoff_delay
        if longest > MAX_TIMER_S:
            raise ValueError(f"@max_s: the longest delay, max_s * (1 + jitter) = {longest:g} s, must be at most "
                             f"{MAX_TIMER_S} s (24 days); got max_s = {self.max_s:g}, jitter = {self.jitter:g}")
        return self


class SupervisorFlags(BaseModel):
    """OTP's ``sup_flags``. Defaults are OTP's: one_for_one, intensity 1, period 5 s."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: Strategy = Strategy.ONE_FOR_ONE
    intensity: StrictInt = Field(1, ge=0)
    period: float = Field(5.0, gt=0, allow_inf_nan=False)
    auto_shutdown: AutoShutdown = AutoShutdown.NEVER
    max_children: StrictInt | None = Field(None, ge=1)


class ChildSpec(BaseModel):
    """One child of a supervisor: a worker, or a supervisor with children of its own.

    ``shutdown`` is OTP's: ``"brutal_kill"`` kills the child at once, without asking (its ``on_stop`` never
    runs; the expected exit is ``killed``); an integer T asks the child to stop (reason ``shutdown``) and
    kills it if it has not exited T ms later (a ``shutdown_timeout`` event, the exit ``killed`` reported as a
    shutdown error); ``"infinity"`` waits for it however long it takes. ``0`` is a timed shutdown with no
    time, as in OTP, **not** ``brutal_kill``: the child is asked first and killed as soon as the supervisor's
    0 ms timer fires, so a child that cannot stop at once ends ``killed`` with the timeout's report. Unset:
    5000 for a worker, ``infinity`` for a supervisor (what ``get_childspec`` answers). A timed ``shutdown`` is
    at most :data:`MAX_TIMER_MS` and ``start_timeout`` at most :data:`MAX_TIMER_S` (24 days): longer, the
    timer would overflow; ``"infinity"`` waits without one.

    ``type`` comes before ``actor`` so that the actor's class is checked against it (:meth:`_actor_fits_type`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    type: ChildType = ChildType.WORKER
    actor: str | None = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = Field(default_factory=dict)
    restart: RestartType = RestartType.PERMANENT
    shutdown: Shutdown | None = None
    significant: StrictBool = False
    backoff: Backoff | None = None
    requires: dict[str, str] = Field(default_factory=dict)
    # Beyond OTP: seconds a start may take before it counts as failed ("infinity": wait forever).
    # Default: infinity for a local child (as OTP), 30 s for one placed by ``requires``, whose
    # node may vanish while the child is being created.
    start_timeout: float | Literal["infinity"] | None = None
    # Only for type = "supervisor": its flags and children.
    strategy: Strategy | None = None
    intensity: StrictInt | None = Field(None, ge=0)
    period: float | None = Field(None, gt=0, allow_inf_nan=False)
    auto_shutdown: AutoShutdown | None = None
    max_children: StrictInt | None = Field(None, ge=1)
    children: tuple[ChildSpec, ...] | None = None

    @field_validator("id")
    @classmethod
    def _id_is_a_path_part(cls, value: str) -> str:
        return check_child_id(value)

    @field_validator("shutdown", mode="before")
    @classmethod
    def _shutdown_non_negative(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(SHUTDOWN_RULE)
        if isinstance(value, int) and value < 0:
            raise ValueError(f"{SHUTDOWN_RULE} (got {value})")
        if isinstance(value, int | float) and value > MAX_TIMER_MS:  # not "brutal_kill" in the text: kept as said
            raise ValueError(f"a timed shutdown is at most {MAX_TIMER_MS} ms (24 days): a longer timer overflows; "
                             "'infinity' waits without one")
        return value

    @field_validator("start_timeout")
    @classmethod
    def _start_timeout_in_range(cls, value: Any) -> Any:
        if isinstance(value, int | float) and not 0 < value <= MAX_TIMER_S:  # nan and inf fail too
            raise ValueError(f"must be a number of seconds > 0 and <= {MAX_TIMER_S} (24 days), or 'infinity' "
                             f"(got {value})")
        return value

    @field_validator("actor")
    @classmethod
    def _actor_imports(cls, value: str | None) -> str | None:
        if value is not None:
            resolve_actor(value)
        return value

    @field_validator("actor")
    @classmethod
    def _actor_fits_type(cls, value: str | None, info: ValidationInfo) -> str | None:
        """The actor's class is of the kind the child's ``type`` needs (:func:`~.actor_paths.kind_problem`).

        Judged on the class :meth:`_actor_imports` (run first) imported; the admin door's spec shape overrides that
        one by name and imports nothing, so a class whose module this process has not imported is judged where the
        child is made."""
        actor = None if value is None else loaded_actor(value)
        child_type = info.data.get("type")  # absent when the type itself was invalid: reported there
        if actor is not None and isinstance(child_type, ChildType):
            problem = kind_problem(value or "", actor, child_type.value)
            if problem is not None:
                raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _check_combinations(self) -> ChildSpec:
        if self.significant and self.restart is RestartType.PERMANENT:
            raise ValueError("significant = true cannot be combined with restart = 'permanent'")
        if self.type is ChildType.WORKER:
            if self.actor is None:
                raise ValueError("a worker needs 'actor', the import path of its class ('module:Class')")
            sup_only = ("strategy", "intensity", "period", "auto_shutdown", "max_children", "children")
            given = [name for name in sup_only if getattr(self, name) is not None]
            if given:
                raise ValueError(f"{', '.join(given)} only apply to type = 'supervisor'")
            return self
        flags = self.flags
        children = self.children or ()
        seen: set[str] = set()
        for index, child in enumerate(children):
            if child.id in seen:
                # "@loc: message" lets the error renderer point at the duplicate itself
                raise ValueError(f"@children[{index}].id: duplicate child id {child.id!r}")
            seen.add(child.id)
        template = flags.strategy is Strategy.SIMPLE_ONE_FOR_ONE
        found = [(f"children[{index}].{problem[0]}", problem[1]) for index, child in enumerate(children)
                 if (problem := _start_arguments(child, template)) is not None]
        if found:  # every child whose on_start cannot take its arguments (build_spec: every one in the tree)
            raise several(found)
        if flags.strategy is Strategy.SIMPLE_ONE_FOR_ONE:
            if len(children) != 1:
                raise ValueError(
                    f"simple_one_for_one needs exactly one child spec (the template), got {len(children)}"
                )
            if flags.auto_shutdown is not AutoShutdown.NEVER:
                raise ValueError("auto_shutdown must be 'never' with simple_one_for_one")
        elif flags.max_children is not None:
            raise ValueError("max_children only applies to strategy = 'simple_one_for_one'")
        if flags.auto_shutdown is AutoShutdown.NEVER:
            for index, child in enumerate(children):
                if child.significant:
                    raise ValueError(
                        f"children[{index}] ({child.id!r}) is significant but auto_shutdown is 'never'"
                    )
        return self

    # -- derived views ---------------------------------------------------------------------

    @property
    def flags(self) -> SupervisorFlags:
        """The supervisor flags of a supervisor spec, OTP defaults filled in."""
        given = {
            name: getattr(self, name)
            for name in ("strategy", "intensity", "period", "auto_shutdown", "max_children")
            if getattr(self, name) is not None
        }
        return SupervisorFlags(**given)

    @property
    def actor_path(self) -> str:
        return self.actor or SUPERVISOR_ACTOR

    @property
    def shutdown_ms(self) -> int | None:
        """Milliseconds to wait after the polite request; None is infinity, and brutal_kill also gives 0
        (no wait) — tell it from a timed ``0`` with :attr:`brutal_kill`."""
        value = self.shutdown
        if value is None:
            return None if self.type is ChildType.SUPERVISOR else DEFAULT_WORKER_SHUTDOWN_MS
        if value == "brutal_kill":
            return 0
        if value == "infinity":
            return None
        return int(value)

    @property
    def brutal_kill(self) -> bool:
        """Killed without being asked to stop (``shutdown = "brutal_kill"``; a timed ``0`` asks first)."""
        return self.shutdown == "brutal_kill"

    @property
    def start_timeout_s(self) -> float | None:
        if self.start_timeout == "infinity":
            return None
        if self.start_timeout is None:
            return DEFAULT_REMOTE_START_TIMEOUT_S if self.requires else None
        return float(self.start_timeout)

    @property
    def is_supervisor(self) -> bool:
        return self.type is ChildType.SUPERVISOR


ChildSpec.model_rebuild()


# -- construction helpers ------------------------------------------------------------------


def worker(id: str, actor: str | type, **fields: Any) -> ChildSpec:
    """A worker child spec; ``actor`` is a class or its import path; other fields as in TOML."""
    return build_spec({"id": id, "actor": actor_path_of(actor), **fields})


def supervisor(id: str, children: list[ChildSpec] | tuple[ChildSpec, ...] = (), **fields: Any) -> ChildSpec:
    """A supervisor child spec (also the root of a tree) with its flags and children."""
    data = {"id": id, "type": "supervisor", "children": tuple(children), **fields}
    if "actor" in data and isinstance(data["actor"], type):
        data["actor"] = actor_path_of(data["actor"])
    return build_spec(data)


def actor_path_of(actor: str | type) -> str:
    if isinstance(actor, str):
        return actor
    return f"{actor.__module__}:{actor.__qualname__}"


def build_spec(data: dict[str, Any], source: str | None = None) -> ChildSpec:
    """Validate a dict into a :class:`ChildSpec`, raising :class:`SpecError` with key paths.

    Every worker whose ``on_start`` cannot take its arguments is named, wherever it is in the tree, with the other
    problems: a supervisor judges its children's arguments only once they are all valid, so the tree as given is
    walked too (:func:`~.spec_arguments.arguments_problems`)."""
    try:
        return ChildSpec.model_validate(data)
    except ValidationError as exc:
        error = spec_error_from(exc, source)
    known = set(error.problems)
    more = [problem for problem in arguments_problems(data) if problem not in known]
    problems = sorted([*error.problems, *more], key=_tree_order) if more else error.problems
    raise SpecError(problems, source) from None


def _tree_order(problem: tuple[str, str]) -> tuple[int, ...]:
    """Where a problem is in the tree, depth first (``children[3].children[0]...``: (3, 0)): a stable sort by it
    keeps pydantic's order and puts the problems added to it in their places."""
    return tuple(int(index) for index in re.findall(r"(?:^|\.)children\[(\d+)\]", problem[0]))


def check_childspecs(specs: list[ChildSpec] | list[dict[str, Any]], auto_shutdown: str = "never") -> None:
    """OTP's ``check_childspecs``: validate a list of specs as the children of one supervisor."""
    children = [s.model_dump() if isinstance(s, ChildSpec) else s for s in specs]
    build_spec({"id": "check", "type": "supervisor", "auto_shutdown": auto_shutdown, "children": children})


def start_arguments_problem(child: ChildSpec, *, template: bool = False) -> str | None:
    """``"<field>: <why>"`` when a worker's ``on_start`` cannot take its spec's ``args`` and ``kwargs`` (see
    :func:`~.actor_paths.arguments_problem`; a supervisor's are not judged), else None."""
    problem = _start_arguments(child, template)
    return None if problem is None else f"{problem[0]}: {problem[1]}"


def _start_arguments(child: ChildSpec, template: bool) -> tuple[str, str] | None:
    if child.type is not ChildType.WORKER or child.actor is None:
        return None
    return judged(resolve_actor(child.actor), child.args, child.kwargs, template=template)


# -- error rendering (spec_errors) ---------------------------------------------------------

_KNOWN_KEYS = sorted(
    set(ChildSpec.model_fields) | set(Backoff.model_fields) | set(SupervisorFlags.model_fields)
)


def spec_error_from(exc: ValidationError, source: str | None = None) -> SpecError:
    """A :class:`SpecError` naming every problem of ``exc`` with its key path (see :mod:`.spec_errors`)."""
    return _spec_error_from(exc, source, _KNOWN_KEYS)


__all__ = [
    "DEFAULT_REMOTE_START_TIMEOUT_S", "DEFAULT_WORKER_SHUTDOWN_MS", "MAX_TIMER_MS", "MAX_TIMER_S", "SUPERVISOR_ACTOR",
    "AutoShutdown", "Backoff", "ChildSpec", "ChildType", "RestartType", "Shutdown", "Strategy", "SupervisorFlags",
    "actor_path_of", "build_spec", "check_child_id", "check_childspecs", "format_location", "resolve_actor",
    "spec_error_from", "start_arguments_problem", "supervisor", "worker",
]
