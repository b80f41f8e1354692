"""What a caller outside the system sends a supervisor or an authority, and the plain positive answer.

Kept apart from :mod:`.protocol` (every message between supervisors and children): a process that only asks
a running system — ``ouroactors status``, ``tree``, the thin client of :mod:`ouroactors.system.client` —
pickles and unpickles these few and nothing else, and a module of frozen dataclasses costs its import
time per class. :mod:`.protocol` re-exports them.

**Correlation.** A supervisor answers an :class:`AdminCall` with the bare value (OTP's reply), which says
nothing about which call it answers: an actor that gave up on a call (timed out) and asks the same supervisor
again could take the late answer of the first for the answer of the second. A caller that may do so sets
``ref`` (a str it chose, unique among its calls); the supervisor then answers :class:`AdminAnswer` with that
``ref``, so the caller keeps the answer of the call it waits for and drops any other. Without ``ref`` the
answer is the bare value, exactly as before. A ``ref`` that is not a str of 1 to :data:`MAX_REF_CHARS`
characters is refused (``BadRequest`` naming ``AdminCall.ref``, bare: the ref itself cannot be trusted).

**Tagged requests.** The same holds for a request to a worker (an authority, a session's runtime): an actor that
asks in sequence (:mod:`ouroactors.runtime.coordinator.calls`) wraps it in :class:`Tagged` with a fresh ``ref``,
and the worker answers :class:`TaggedAnswer` with it — its answer, refusal or error, whatever it would have
answered the bare request with — so a late answer is never taken for the next one. A worker serves bare requests
as before. A :class:`Tagged` whose ``ref`` has a problem is refused bare (``BadRequest`` naming ``Tagged.ref``).

**The door.** Every field of an :class:`AdminCall` is checked before the supervisor acts on it
(:func:`admin_call_problem`): ``op`` one of :data:`ADMIN_OPS`; ``child_id`` None or a str of 1 to
:data:`MAX_CHILD_ID_CHARS` characters; ``spec`` None or a valid :class:`~.specs.ChildSpec` (re-validated, since
an unpickled model never ran its validators — all but the actor path's import, which only the node that creates
the child can judge); ``extra_args`` a tuple — or a list, OTP's ``ExtraArgs`` — of at most
:data:`MAX_EXTRA_ARGS` items, each passed to the child as it is; ``ref`` as above. A call with a problem is
answered ``BadRequest("AdminCall", field, problem, value)`` (inside ``AdminAnswer`` when its ``ref`` is good)
and changes nothing; the supervisor serves on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from ..core.errors import BadRequest

if TYPE_CHECKING:
    from .specs import ChildSpec


@dataclass(frozen=True)
class AdminCall:
    """A caller → a supervisor: one call of the OTP admin API."""

    NEVER_AN_ANSWER: ClassVar[bool] = True  # sent to an actor, never an answer (see system._answers.tagged_for)

    op: str
    child_id: str | None = None
    spec: ChildSpec | None = None
    extra_args: tuple[Any, ...] = ()
    ref: str | None = None  # the caller's correlation id: set, the answer is AdminAnswer(ref, value)


MAX_REF_CHARS = 128


@dataclass(frozen=True)
class Tagged:
    """A caller → a worker: ``request`` (what it would send bare), answered :class:`TaggedAnswer` ``(ref, …)``."""

    NEVER_AN_ANSWER: ClassVar[bool] = True  # sent to an actor, never an answer (see system._answers.tagged_for)

    ref: str
    request: Any
    notice: bool = False  # a handle's ask: told Unanswered when the handler returns None and keeps no asker


@dataclass(frozen=True)
class Unanswered:
    """A worker → a handle whose :class:`Tagged` ask asked for ``notice``: the handler returned None (which sends no
    answer) and kept no asker (``Worker.asker_of``), so nothing will answer unless the worker itself sends the handle
    something later. Never an answer: the ask waits on as before, and if its timeout ends it, says why."""

    NEVER_AN_ANSWER: ClassVar[bool] = True

    ref: str
    path: str


@dataclass(frozen=True)
class Undecodable:
    """What arrived instead of a message whose pickle named classes this process cannot import (``missing``:
    ``module.Name (why)`` each; made by ``system._decoding``). As an answer it is an ``UnsendableAnswer`` for the
    asker; as a request, a worker refuses it with ``BadRequest``."""

    missing: tuple[str, ...]

    def describe(self) -> str:
        """The missing classes, for an error message."""
        return "; ".join(self.missing)


@dataclass(frozen=True)
class Asker:
    """The sender of a request and the tag its answer carries (None: a bare request): a worker that answers after
    its handler returned keeps one (``Worker.asker_of``) and answers through it (``Worker.answer_asker``)."""

    address: Any
    tag: str | None = None


@dataclass(frozen=True)
class TaggedAnswer:
    """A worker → the caller of a :class:`Tagged` request: what it answers the bare request with, and its ``ref``."""

    ref: str
    value: Any


def tagged_problem(message: Tagged) -> BadRequest | None:
    """The refusal of a malformed :class:`Tagged` (a bad ref, a request tagged twice, a ``notice`` that is no
    bool), or None."""
    problem = ref_problem(message.ref) or (None if isinstance(message.ref, str) else "must be a str")
    if problem is None and isinstance(message.request, Tagged):
        problem = "tags a request that is tagged already"
    if problem is not None:
        return BadRequest("Tagged", "ref", problem, repr(message.ref)[:80])
    notice = getattr(message, "notice", False)
    if type(notice) is not bool:
        return BadRequest("Tagged", "notice", "must be a bool", repr(notice)[:80])
    return None


def ref_problem(ref: object) -> str | None:
    """What is wrong with ``ref`` as an :class:`AdminCall`'s ``ref`` (None: nothing; None itself is no ref)."""
    if ref is None:
        return None
    if type(ref) is not str:
        return f"must be a str or None, not {type(ref).__name__}"
    if not 1 <= len(ref) <= MAX_REF_CHARS:
        return f"must be 1 to {MAX_REF_CHARS} characters, not {len(ref)}"
    return None


# What a supervisor implements: one ``_admin_<op>`` method each (supervision.admin.AdminApi; a test keeps the two
# in step). Listed here so the door needs no import of the supervisor's core.
ADMIN_OPS = frozenset({
    "start_child", "terminate_child", "restart_child", "delete_child",
    "which_children", "which_child", "count_children", "get_childspec",
})
MAX_CHILD_ID_CHARS = 1024  # a child id names a child (spec ids are >= 1 character); far above any real one
MAX_EXTRA_ARGS = 64  # start_child's extra arguments, appended to the template's


class CallProblem(NamedTuple):
    """What is wrong with an :class:`AdminCall`: the ``field`` (a key path: ``spec.children[0].restart``; empty:
    the call itself), the ``problem`` in words, and the offending ``value``."""

    field: str
    problem: str
    value: Any


_FIELDS = ("op", "child_id", "spec", "extra_args")  # each must be there; ``ref`` may be missing (None)


def admin_call_problem(call: object) -> CallProblem | None:
    """The first thing wrong with ``call`` as an :class:`AdminCall` at a supervisor's door, or None.

    Pure, and never raises, whatever the fields hold (an unpickled call may hold anything: its ``__init__``
    never ran). ``ref`` is checked first: a bad ``ref``, or a call refused as a whole (``field`` empty: not
    exactly an AdminCall, or fields that cannot be read safely), is answered bare, any other problem inside
    ``AdminAnswer`` when the ``ref`` is good.
    """
    if type(call) is not AdminCall:  # a subclass could bend any field's reading
        return CallProblem("", f"must be an AdminCall, not {type(call).__name__}", None)
    state = _state(call)
    if state is None:
        return CallProblem("", "must hold its fields in a plain dict under str names", None)
    bad_ref = ref_problem(state.get("ref"))
    if bad_ref is not None:
        return CallProblem("ref", bad_ref, state.get("ref"))
    for name in _FIELDS:
        if name not in state:
            return CallProblem(name, "is missing", None)
    op, child_id, spec, extra_args = (state[name] for name in _FIELDS)
    if type(op) is not str:
        return CallProblem("op", f"must be a str, not {type(op).__name__}", op)
    if op not in ADMIN_OPS:
        return CallProblem("op", f"must be one of {', '.join(sorted(ADMIN_OPS))}", op)
    if child_id is not None:
        if type(child_id) is not str:
            return CallProblem("child_id", f"must be a str or None, not {type(child_id).__name__}", child_id)
        if not 1 <= len(child_id) <= MAX_CHILD_ID_CHARS:
            return CallProblem("child_id", f"must be 1 to {MAX_CHILD_ID_CHARS} characters, not {len(child_id)}",
                               child_id)
    if type(extra_args) not in (tuple, list):
        return CallProblem("extra_args", f"must be a tuple (or a list), not {type(extra_args).__name__}", extra_args)
    if len(extra_args) > MAX_EXTRA_ARGS:
        return CallProblem("extra_args", f"must have at most {MAX_EXTRA_ARGS} items, not {len(extra_args)}", None)
    if spec is not None:
        return _spec_problem(spec)
    return None


def _state(call: AdminCall) -> dict[str, Any] | None:
    """The call's fields as they arrived, or None when reading them by name could run the sender's code: an
    instance dict that is not a dict, or a key that is not exactly a str (a str subclass's ``__eq__`` would run
    on every attribute lookup; only an instance dict of plain str keys is read by name afterwards)."""
    try:
        state = object.__getattribute__(call, "__dict__")
    except Exception:
        return None
    if type(state) is not dict or any(type(k) is not str for k in state):
        return None
    return state


def _spec_problem(spec: object) -> CallProblem | None:
    from .specs import ChildSpec  # lazily: pydantic stays out of a process that only asks

    if type(spec) is not ChildSpec:
        return CallProblem("spec", f"must be a ChildSpec or None, not {type(spec).__name__}", spec)
    try:
        problem = _model_problem(spec, "spec", 0)
    except RecursionError:
        return CallProblem("spec", "is nested too deeply", None)
    if problem is not None:
        return problem
    key = object.__getattribute__(spec, "id")  # valid now: a str
    if len(key) > MAX_CHILD_ID_CHARS:  # a child no call could name afterwards
        return CallProblem("spec.id", f"must be 1 to {MAX_CHILD_ID_CHARS} characters, not {len(key)}", key)
    return None


MAX_SPEC_DEPTH = 32  # supervisors nested in a spec given to start_child


def _model_problem(model: Any, path: str, depth: int) -> CallProblem | None:
    """``model`` (a ChildSpec or a Backoff, exactly) re-validated strictly from its fields, nested models first.

    An unpickled pydantic model never ran its validators; a valid one passes unchanged (its fields already have
    the declared types), and it is the model as sent, not the re-validated copy, that the supervisor uses.
    """
    from .specs import Backoff, ChildSpec

    if depth > MAX_SPEC_DEPTH:
        return CallProblem(path, f"nests more than {MAX_SPEC_DEPTH} levels of children", None)
    cls = type(model)
    try:
        state = object.__getattribute__(model, "__dict__")
    except Exception:
        state = None
    if type(state) is not dict or any(type(k) is not str for k in state):  # as for the call itself
        return CallProblem(path, "must hold its fields in a plain dict under str names", None)
    fields = cls.model_fields
    for name in state:
        if name not in fields:
            return CallProblem(f"{path}.{name}", f"is not a field of {cls.__name__}", None)
    data: dict[str, Any] = {}
    for name in fields:
        if name not in state:
            return CallProblem(f"{path}.{name}", "is missing", None)
        data[name] = state[name]
    backoff = data.get("backoff")
    if backoff is not None:
        if type(backoff) is not Backoff:
            return CallProblem(f"{path}.backoff", f"must be a Backoff or None, not {type(backoff).__name__}", backoff)
        problem = _model_problem(backoff, f"{path}.backoff", depth)
        if problem is not None:
            return problem
    children = data.get("children")
    if type(children) is tuple:
        for index, child in enumerate(children):
            where = f"{path}.children[{index}]"
            if type(child) is not ChildSpec:
                return CallProblem(where, f"must be a ChildSpec, not {type(child).__name__}", child)
            problem = _model_problem(child, where, depth + 1)
            if problem is not None:
                return problem
    try:
        (_spec_shape() if cls is ChildSpec else cls).model_validate(data, strict=True)
    except RecursionError:
        raise
    except Exception as exc:  # pydantic's ValidationError (not imported here), or a validator's own error
        return _validation_problem(exc, path)
    return None


def _validation_problem(exc: Exception, path: str) -> CallProblem:
    errors = getattr(exc, "errors", None)
    try:
        first = errors()[0] if callable(errors) else None
        where = ".".join(str(part) for part in first.get("loc", ())) if first else ""
        problem = str(first.get("msg", exc)) if first else f"{type(exc).__name__}: {exc}"
        value = first.get("input") if first else None
    except Exception:
        where, problem, value = "", f"is not a valid {path}", None
    return CallProblem(f"{path}.{where}" if where else path, problem[:200], value)


_SHAPE: Any = None


def _spec_shape() -> Any:
    """ChildSpec as it validates everywhere but for the actor path's import: that is judged where the child is
    created (thespian may place it on another node, the only one that has its module)."""
    global _SHAPE
    if _SHAPE is None:
        from pydantic import field_validator

        from .specs import ChildSpec

        class _ChildSpecShape(ChildSpec):
            @field_validator("actor")
            @classmethod
            def _actor_imports(cls, value: str | None) -> str | None:  # overrides ChildSpec's by name
                return value

        _SHAPE = _ChildSpecShape
    return _SHAPE


@dataclass(frozen=True)
class AdminAnswer:
    """A supervisor → the caller of an :class:`AdminCall` that carried ``ref``: its answer, ``value`` (what the
    call without a ref is answered with: an :class:`Ok`, a value or an error)."""

    ref: str
    value: Any


def generation_problem(value: object) -> str | None:
    """Why ``value`` cannot be an envelope's generation (:class:`Addressed`, :class:`Stamped`), or None. None itself
    is allowed (a sender that knows no generation: refused as stale). Anything else but a 64-bit int is refused at
    the door: built into the stale refusal's text, a str or a NaN raised, and the worker crashed."""
    if value is None or (type(value) is int and -(1 << 63) <= value < 1 << 64):
        return None
    return "must be a 64-bit int (or None)"


@dataclass(frozen=True)
class Addressed:
    """A request for the worker of one generation only (an ``ActorRef``'s, which names one incarnation).

    An address is a TCP port: a worker that died frees it for whoever comes next, who would receive what is still
    sent to the dead one. A worker of another generation answers ``StaleGeneration`` and does nothing. Unlike
    :class:`Stamped`, it says nothing of the authority generation a request was decided under: an authority still
    wants its ``payload`` stamped (fencing stays the sender's to state, never implied by an address)."""

    NEVER_AN_ANSWER: ClassVar[bool] = True  # sent to an actor, never an answer (see system._answers.tagged_for)

    generation: int
    payload: Any


@dataclass(frozen=True)
class Stamped:
    """A request to an authority, stamped with the generation the sender was bound to."""

    NEVER_AN_ANSWER: ClassVar[bool] = True  # sent to an actor, never an answer (see system._answers.tagged_for)

    generation: int | None
    payload: Any


@dataclass(frozen=True)
class Ok:
    """A positive answer with no value (so an answer is never ``None``, thespian's "no answer")."""

    value: Any = None
