"""Child specs and supervisor flags: the one description of a supervision tree.

A tree is a :class:`ChildSpec` of ``type = "supervisor"`` whose ``children`` are child specs
again, so a tree written in Python (with :func:`worker` / :func:`supervisor`) and the same tree
loaded from TOML are the same objects and compare equal.

Validation follows OTP's ``check_childspec`` and ``check_flags`` rule for rule and goes further
where OTP is lenient: unknown keys are refused instead of ignored (a typo in a supervision tree
must not pass silently), and an actor path must import before anything starts. Every problem is
reported with its key path (``children[2].restart``) and the allowed values.
"""

from __future__ import annotations

import difflib
from enum import Enum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from ..core.errors import SpecError
from .actor_paths import arguments_problem, resolve_actor
from .calls import MAX_CHILD_ID_CHARS

SUPERVISOR_ACTOR = "ouroactors.supervision.supervisor:Supervisor"
DEFAULT_WORKER_SHUTDOWN_MS = 5000
DEFAULT_REMOTE_START_TIMEOUT_S = 30.0


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

    min_s: float = Field(0.1, ge=0)
    max_s: float = Field(10.0, ge=0)
    jitter: float = Field(0.1, ge=0, le=1)
    reset_after_s: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _min_le_max(self) -> Backoff:
        if self.max_s < self.min_s:
            raise ValueError(f"max_s ({self.max_s}) must be >= min_s ({self.min_s})")
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
    5000 for a worker, ``infinity`` for a supervisor (what ``get_childspec`` answers).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    actor: str | None = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = Field(default_factory=dict)
    restart: RestartType = RestartType.PERMANENT
    shutdown: Shutdown | None = None
    type: ChildType = ChildType.WORKER
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
            raise ValueError("must be a number of milliseconds >= 0, 'brutal_kill' or 'infinity'")
        if isinstance(value, int) and value < 0:
            raise ValueError(
                f"must be a number of milliseconds >= 0, 'brutal_kill' or 'infinity' (got {value})"
            )
        return value

    @field_validator("start_timeout")
    @classmethod
    def _start_timeout_positive(cls, value: Any) -> Any:
        if isinstance(value, int | float) and not value > 0:
            raise ValueError(f"must be a number of seconds > 0 or 'infinity' (got {value})")
        return value

    @field_validator("actor")
    @classmethod
    def _actor_imports(cls, value: str | None) -> str | None:
        if value is not None:
            resolve_actor(value)
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
        for index, child in enumerate(children):
            problem = start_arguments_problem(child, template=flags.strategy is Strategy.SIMPLE_ONE_FOR_ONE)
            if problem is not None:
                raise ValueError(f"@children[{index}].{problem}")
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
    """Validate a dict into a :class:`ChildSpec`, raising :class:`SpecError` with key paths."""
    try:
        return ChildSpec.model_validate(data)
    except ValidationError as exc:
        raise spec_error_from(exc, source) from None


def check_childspecs(specs: list[ChildSpec] | list[dict[str, Any]], auto_shutdown: str = "never") -> None:
    """OTP's ``check_childspecs``: validate a list of specs as the children of one supervisor."""
    children = [s.model_dump() if isinstance(s, ChildSpec) else s for s in specs]
    build_spec({"id": "check", "type": "supervisor", "auto_shutdown": auto_shutdown, "children": children})


def start_arguments_problem(child: ChildSpec, *, template: bool = False) -> str | None:
    """``"<field>: <why>"`` when a worker's ``on_start`` cannot take its spec's ``args`` and ``kwargs`` (see
    :func:`~.actor_paths.arguments_problem`; a supervisor's are not judged), else None."""
    if child.type is not ChildType.WORKER or child.actor is None:
        return None
    problem = arguments_problem(resolve_actor(child.actor), child.args, child.kwargs, template=template)
    return None if problem is None else f"{'kwargs' if child.kwargs else 'args'}: {problem}"


# -- error rendering -----------------------------------------------------------------------

_KNOWN_KEYS = sorted(
    set(ChildSpec.model_fields) | set(Backoff.model_fields) | set(SupervisorFlags.model_fields)
)

# What an OTP (or Akka, or thespian) user writes first, and what the key is called here: spelling alone would point
# ``start`` at ``restart``, which is not what they meant.
_NAMED_ELSEWHERE = {
    "start": "actor",  # OTP's {M, F, A}: here the import path of the worker, "module:Class"
    "module": "actor",
    "class": "actor",
    "actor_class": "actor",
    "max_restarts": "intensity",
    "max_seconds": "period",
    "max_r": "intensity",
    "max_t": "period",
    "name": "id",
}


def format_location(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("int", "str", "literal['brutal_kill','infinity']", "function-after[_min_le_max(), Backoff]"):
            continue  # pydantic's union-branch markers say nothing to a user
        else:
            out += f".{part}" if out else str(part)
    return out


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def spec_error_from(exc: ValidationError, source: str | None = None) -> SpecError:
    problems: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for error in exc.errors():
        loc = format_location(tuple(error["loc"]))
        if error["type"] == "extra_forbidden":
            key = str(error["loc"][-1])
            close = [_NAMED_ELSEWHERE[key]] if key in _NAMED_ELSEWHERE else difflib.get_close_matches(key, _KNOWN_KEYS)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            if close[:1] == ["actor"]:
                hint = hint[:-1] + ' the worker\'s import path, "module:Class")'
            message = f"unknown key {key!r}{hint}"
        elif error["type"] == "missing":
            message = "is required"
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            if message.startswith("@"):
                inner, _, message = message[1:].partition(": ")
                loc = f"{loc}.{inner}" if loc else inner
        shutdown = (loc.endswith(".shutdown") or loc == "shutdown") and (
            "brutal_kill" in message or "Input should be" in message)
        if shutdown:
            message = "must be a number of milliseconds >= 0, 'brutal_kill' or 'infinity'"
        given = error.get("input")
        closed = shutdown or error["type"] in ("enum", "literal_error")
        scalar = isinstance(given, str | int | float | bool) and error["type"] not in ("missing", "extra_forbidden")
        if "input" in error and (closed or (scalar and "; got " not in message and repr(given) not in message)):
            message = f"{message}; got {_shown(given)}"  # a wrong value: show what was given
        item = (loc, message)
        if item not in seen:
            seen.add(item)
            problems.append(item)
    return SpecError(problems, source)
