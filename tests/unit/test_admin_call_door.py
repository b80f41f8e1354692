"""The door of a supervisor: :func:`admin_call_problem` checks every field of an :class:`AdminCall` as it arrives
unpickled (any field may hold anything), names the first bad one, never raises, and accepts every well-formed call
— the ones the framework itself sends included."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ouroactors.supervision.admin import AdminApi
from ouroactors.supervision.calls import (
    ADMIN_OPS,
    MAX_CHILD_ID_CHARS,
    MAX_EXTRA_ARGS,
    MAX_REF_CHARS,
    MAX_SPEC_DEPTH,
    AdminCall,
    CallProblem,
    admin_call_problem,
)
from ouroactors.supervision.specs import Backoff, ChildSpec, supervisor, worker

ECHO = "ouroactors.examples.workers:Echo"


def unpickled(state: dict[Any, Any] | None = None, /, **fields: Any) -> AdminCall:
    """An AdminCall as unpickling builds it: no ``__init__`` ran, the instance dict is whatever was sent."""
    call = AdminCall.__new__(AdminCall)
    object.__setattr__(call, "__dict__", {**(state or {}), **fields})
    return call


def test_the_ops_are_exactly_the_ones_the_supervisor_implements() -> None:
    implemented = {name.removeprefix("_admin_") for name in dir(AdminApi) if name.startswith("_admin_")}
    assert implemented == ADMIN_OPS


@pytest.mark.parametrize("call", [
    AdminCall("which_children"),
    AdminCall("which_children", ref="r" * MAX_REF_CHARS),
    AdminCall("which_child", "runtime#1"),
    AdminCall("which_child", "x" * MAX_CHILD_ID_CHARS, ref="r-1"),
    AdminCall("terminate_child", "echo"),
    AdminCall("restart_child", "echo"),
    AdminCall("delete_child", "echo"),
    AdminCall("get_childspec", "echo"),
    AdminCall("count_children"),
    AdminCall("terminate_child"),  # no child id: the supervisor answers ChildNotFound, as before
    AdminCall("start_child", extra_args=("session-1",)),
    AdminCall("start_child", extra_args=[1, "two", {"three": 3}]),  # a list, OTP's ExtraArgs
    AdminCall("start_child", extra_args=tuple(range(MAX_EXTRA_ARGS))),
    AdminCall("start_child", spec=worker("w", ECHO)),
    AdminCall("start_child", spec=worker("w", ECHO, restart="transient", shutdown="brutal_kill", args=(1, [2]),
                                         kwargs={"k": object()}, backoff={"min_s": 1, "max_s": 2},
                                         start_timeout=3, requires={"gpu": "yes"}, significant=True)),
    AdminCall("start_child", spec=supervisor("s", [worker("a", ECHO), supervisor("t", [worker("b", ECHO)])],
                                             strategy="rest_for_one", intensity=0, period=2)),
    AdminCall("start_child", spec=supervisor("pool", [worker("job", ECHO)], strategy="simple_one_for_one",
                                             max_children=3)),
    AdminCall("start_child", spec=worker("w", ECHO).model_copy(update={"actor": "elsewhere.only:Worker"})),
])
def test_well_formed_calls_pass(call: AdminCall) -> None:
    assert admin_call_problem(call) is None


def test_an_unpickled_call_of_an_older_sender_without_ref_passes() -> None:
    assert admin_call_problem(unpickled(op="which_children", child_id=None, spec=None, extra_args=())) is None


def test_the_actor_path_is_not_imported_at_the_door() -> None:
    """Thespian may create the child on another node, the only one with its module: that node judges it."""
    spec = worker("w", ECHO).model_copy(update={"actor": "no_such_module_anywhere:Worker"})
    assert admin_call_problem(AdminCall("start_child", spec=spec)) is None


class Hostile:
    """Raises from everything a careless check might call."""

    def __repr__(self) -> str:
        raise RuntimeError("repr")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __len__(self) -> int:
        raise RuntimeError("len")

    def __iter__(self) -> Any:
        raise RuntimeError("iter")

    def __bool__(self) -> bool:
        raise RuntimeError("bool")


class SneakyStr(str):
    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __len__(self) -> int:
        raise RuntimeError("len")


class OtherStr(str):
    pass


class EvilKey(str):
    """Hashes as the str it spells, so a dict lookup of that name compares with it: and that raises."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")


class SneakyTuple(tuple):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        raise RuntimeError("iter")


@pytest.mark.parametrize(("fields", "field", "words"), [
    ({"op": ["which_children"]}, "op", "must be a str, not list"),
    ({"op": 7}, "op", "must be a str, not int"),
    ({"op": None}, "op", "must be a str, not NoneType"),
    ({"op": "kill_everything"}, "op", "must be one of count_children, delete_child"),
    ({"op": "__init__"}, "op", "must be one of"),
    ({"op": SneakyStr("which_children")}, "op", "must be a str, not SneakyStr"),
    ({"child_id": ["echo"]}, "child_id", "must be a str or None, not list"),
    ({"child_id": 3}, "child_id", "must be a str or None, not int"),
    ({"child_id": ""}, "child_id", f"must be 1 to {MAX_CHILD_ID_CHARS} characters, not 0"),
    ({"child_id": "x" * 10_000_000}, "child_id", "not 10000000"),
    ({"child_id": Hostile()}, "child_id", "must be a str or None, not Hostile"),
    ({"spec": "worker"}, "spec", "must be a ChildSpec or None, not str"),
    ({"spec": {"id": "w", "actor": ECHO}}, "spec", "must be a ChildSpec or None, not dict"),
    ({"spec": Backoff()}, "spec", "must be a ChildSpec or None, not Backoff"),
    ({"spec": ChildSpec.model_construct(id=["w"], actor=ECHO)}, "spec.id", "valid string"),
    ({"spec": ChildSpec.model_construct(id="w", actor=ECHO, restart="sometimes")}, "spec.restart", "RestartType"),
    ({"spec": ChildSpec.model_construct(id="w", actor=None)}, "spec", "a worker needs 'actor'"),
    ({"spec": worker("w", ECHO).model_copy(update={"args": [1]})}, "spec.args", "tuple"),
    ({"spec": worker("w", ECHO).model_copy(update={"shutdown": -5})}, "spec.shutdown", ">= 0"),
    ({"spec": worker("w", ECHO).model_copy(update={"backoff": {"min_s": 1}})}, "spec.backoff",
     "must be a Backoff or None, not dict"),
    ({"spec": worker("w", ECHO).model_copy(update={"backoff": Backoff.model_construct(min_s=5.0, max_s=1.0,
                                                                                      jitter=0.1)})},
     "spec.backoff", "must be >= min_s"),
    ({"spec": supervisor("s", [worker("a", ECHO)]).model_copy(
        update={"children": (worker("a", ECHO), ChildSpec.model_construct(id=("b",), actor=ECHO))})},
     "spec.children[1].id", "valid string"),
    ({"spec": supervisor("s", [worker("a", ECHO)]).model_copy(update={"children": (worker("a", ECHO), "b")})},
     "spec.children[1]", "must be a ChildSpec, not str"),
    ({"spec": supervisor("s", [worker("a", ECHO)]).model_copy(update={"children": (worker("a", ECHO),) * 2})},
     "spec", "duplicate child id"),
    ({"spec": ChildSpec.model_construct(id="w" * (MAX_CHILD_ID_CHARS + 1), actor=ECHO)}, "spec.id", "must be 1 to"),
    ({"spec": ChildSpec.model_construct(id="a/b", actor=ECHO)}, "spec.id", "holds '/'"),
    ({"spec": supervisor("s", [worker("a", ECHO)]).model_copy(
        update={"children": (ChildSpec.model_construct(id="b\x1b[2J", actor=ECHO),)})},
     "spec.children[0].id", "not printable"),
    ({"extra_args": "abc"}, "extra_args", "must be a tuple (or a list), not str"),
    ({"extra_args": None}, "extra_args", "not NoneType"),
    ({"extra_args": {"a": 1}}, "extra_args", "not dict"),
    ({"extra_args": SneakyTuple((1,))}, "extra_args", "not SneakyTuple"),
    ({"extra_args": tuple(range(MAX_EXTRA_ARGS + 1))}, "extra_args", f"at most {MAX_EXTRA_ARGS} items"),
    ({"ref": 7}, "ref", "must be a str or None, not int"),
    ({"ref": "", "op": 7}, "ref", "must be 1 to"),  # the ref first: it decides how the refusal is sent
    ({"ref": Hostile()}, "ref", "not Hostile"),
])
def test_each_bad_field_is_named(fields: dict[str, Any], field: str, words: str) -> None:
    call = unpickled(**{"op": "start_child", "child_id": None, "spec": None, "extra_args": (), **fields})
    found = admin_call_problem(call)
    assert isinstance(found, CallProblem), found
    assert found.field == field and words in found.problem, found


@pytest.mark.parametrize("missing", ["op", "child_id", "spec", "extra_args"])
def test_a_missing_field_is_named(missing: str) -> None:
    fields = {"op": "which_children", "child_id": None, "spec": None, "extra_args": ()}
    del fields[missing]
    assert admin_call_problem(unpickled(**fields)) == CallProblem(missing, "is missing", None)


def test_a_subclass_or_another_type_is_refused_as_a_whole() -> None:
    class Bent(AdminCall):
        @property  # type: ignore[misc]
        def op(self) -> str:  # type: ignore[override]
            raise RuntimeError("bent")

    assert admin_call_problem(Bent.__new__(Bent)) == CallProblem("", "must be an AdminCall, not Bent", None)
    assert admin_call_problem("which_children") is not None


@pytest.mark.parametrize("odd_key", [1, OtherStr("op"), EvilKey("ref"), EvilKey("unrelated")])
def test_an_instance_dict_with_a_key_that_is_not_exactly_a_str_is_refused_as_a_whole(odd_key: object) -> None:
    """Such a key would run the sender's ``__eq__`` on every attribute lookup the supervisor makes afterwards."""
    fields: dict[Any, Any] = {"op": "which_children", "child_id": None, "spec": None, "extra_args": ()}
    fields.pop(str(odd_key), None)  # a key equal to a str already there would not replace it
    fields[odd_key] = "x"
    found = admin_call_problem(unpickled(fields))
    assert found is not None and found.field == "" and "str names" in found.problem, found


def test_a_spec_with_a_key_that_is_not_a_field_or_not_a_str_is_refused() -> None:
    for odd_key, field, words in ((EvilKey("id"), "spec", "str names"), ("flags", "spec.flags", "not a field")):
        spec = worker("w", ECHO)
        state = dict(spec.__dict__)
        if isinstance(odd_key, EvilKey):
            del state["id"]
        state[odd_key] = "x"
        object.__setattr__(spec, "__dict__", state)
        found = admin_call_problem(AdminCall("start_child", spec=spec))
        assert found is not None and found.field == field and words in found.problem, found


def test_a_spec_nested_too_deeply_is_refused_not_a_recursion_error() -> None:
    spec = worker("leaf", ECHO)
    for depth in range(MAX_SPEC_DEPTH + 5):
        spec = ChildSpec.model_construct(id=f"s{depth}", type="supervisor", children=(spec,))
    found = admin_call_problem(AdminCall("start_child", spec=spec))
    assert found is not None and found.field.startswith("spec") and "levels" in found.problem, found
    for _ in range(5000):  # beyond Python's recursion limit as well
        spec = ChildSpec.model_construct(id="s", type="supervisor", children=(spec,))
    assert admin_call_problem(AdminCall("start_child", spec=spec)) is not None


# -- properties ---------------------------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([math.inf, math.nan, -0.0]),
    st.text(max_size=20), st.sampled_from(["s" * 2000, "x\udcff", "\x00", "", "which_children", "start_child"]),
    st.binary(max_size=20), st.builds(Hostile), st.builds(SneakyStr, st.text(max_size=5)),
)
junk = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple),
    st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner, max_size=4),
    st.frozensets(st.integers(), max_size=3), st.builds(SneakyTuple, st.lists(inner, max_size=3)),
), max_leaves=10)


@st.composite
def unvalidated_specs(draw: st.DrawFn, depth: int = 0) -> ChildSpec:
    """A ChildSpec as unpickling may build it: no validator ran, some fields junk or absent."""
    good: dict[str, Any] = dict(worker("w", ECHO, backoff={"min_s": 1, "max_s": 2}).__dict__)
    bad = draw(st.lists(st.sampled_from(sorted(good)), max_size=3, unique=True))
    fields = {k: (draw(junk) if k in bad else v) for k, v in good.items()}
    for gone in draw(st.lists(st.sampled_from(sorted(good)), max_size=1)):
        fields.pop(gone, None)
    if depth < 2 and draw(st.booleans()):
        fields.update(type="supervisor", actor=None, backoff=None,
                      children=tuple(draw(st.lists(unvalidated_specs(depth + 1), max_size=2))))
    if draw(st.booleans()) and fields.get("backoff") is not None:
        fields["backoff"] = Backoff.model_construct(min_s=draw(junk), max_s=draw(junk), jitter=0.1)
    if draw(st.integers(0, 9)) == 0:
        odd = draw(st.one_of(st.integers(), st.builds(EvilKey, st.sampled_from(["id", "args"]))))
        fields.pop(str(odd), None)
        fields[odd] = "x"
    spec = ChildSpec.__new__(ChildSpec)
    object.__setattr__(spec, "__dict__", fields)
    object.__setattr__(spec, "__pydantic_fields_set__", set(fields))
    object.__setattr__(spec, "__pydantic_extra__", None)
    object.__setattr__(spec, "__pydantic_private__", None)
    return spec


@given(fields=st.fixed_dictionaries({
    "op": st.one_of(st.sampled_from(sorted(ADMIN_OPS)), junk),
    "child_id": st.one_of(st.none(), st.text(min_size=1, max_size=30), junk),
    "spec": st.one_of(st.none(), unvalidated_specs(), junk),
    "extra_args": st.one_of(st.just(()), st.lists(junk, max_size=3), junk),
    "ref": st.one_of(st.none(), st.text(min_size=1, max_size=10), junk),
}), drop=st.lists(st.sampled_from(["op", "child_id", "spec", "extra_args", "ref"]), max_size=2),
   odd_key=st.one_of(st.none(), st.none(), st.integers(), st.builds(EvilKey, st.sampled_from(["ref", "z"]))))
@pytest.mark.slow
@settings(max_examples=400, deadline=None)
def test_arbitrary_fields_never_raise_and_a_problem_names_a_field(fields: dict[str, Any], drop: list[str],
                                                                   odd_key: object) -> None:
    for name in drop:
        fields.pop(name, None)
    state: dict[Any, Any] = dict(fields)
    if odd_key is not None:
        state.pop(str(odd_key), None)  # an EvilKey may not meet the str it spells: inserting it would compare them
        state[odd_key] = "x"
    found = admin_call_problem(unpickled(state))
    if found is not None:
        assert type(found.field) is str and type(found.problem) is str and found.problem
        assert found.field.split(".")[0].split("[")[0] in {"", "op", "child_id", "spec", "extra_args", "ref"}
    else:
        assert odd_key is None


idents = st.text(min_size=1, max_size=40).filter(lambda t: "/" not in t and t.isprintable() and t == t.strip())


@st.composite
def valid_specs(draw: st.DrawFn, depth: int = 0) -> ChildSpec:
    if depth < 2 and draw(st.booleans()):
        children = draw(st.lists(valid_specs(depth + 1), max_size=3, unique_by=lambda s: s.id))
        strategy = draw(st.sampled_from(["one_for_one", "one_for_all", "rest_for_one"]))
        return supervisor(draw(idents), children, strategy=strategy,
                          intensity=draw(st.integers(0, 10)),
                          period=draw(st.one_of(st.integers(1, 60), st.floats(0.1, 60.0))))
    fields: dict[str, Any] = {
        "restart": draw(st.sampled_from(["permanent", "transient", "temporary"])),
        "args": tuple(draw(st.lists(st.one_of(st.integers(), st.text(max_size=5), st.none()), max_size=3))),
        "kwargs": draw(st.dictionaries(st.text(max_size=5), st.integers(), max_size=2)),
        "requires": draw(st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2)),
    }
    shutdown = draw(st.one_of(st.none(), st.integers(0, 10**6), st.sampled_from(["brutal_kill", "infinity"])))
    if shutdown is not None:
        fields["shutdown"] = shutdown
    timeout = draw(st.one_of(st.none(), st.integers(1, 100), st.floats(0.01, 100.0), st.just("infinity")))
    if timeout is not None:
        fields["start_timeout"] = timeout
    if draw(st.booleans()):
        low = draw(st.integers(0, 5))
        fields["backoff"] = {"min_s": low, "max_s": low + draw(st.floats(0, 5)), "jitter": draw(st.floats(0, 1))}
    return worker(draw(idents), ECHO, **fields)


@given(op=st.sampled_from(sorted(ADMIN_OPS)), child_id=st.one_of(st.none(), st.text(min_size=1, max_size=60)),
       spec=st.one_of(st.none(), valid_specs()),
       extra_args=st.lists(st.one_of(st.integers(), st.text(max_size=5), st.none()), max_size=MAX_EXTRA_ARGS),
       as_list=st.booleans(), ref=st.one_of(st.none(), st.text(min_size=1, max_size=MAX_REF_CHARS)))
@settings(max_examples=300, deadline=None)
def test_a_well_formed_call_is_accepted(op: str, child_id: str | None, spec: ChildSpec | None,
                                        extra_args: list[Any], as_list: bool, ref: str | None) -> None:
    call = AdminCall(op, child_id, spec, extra_args if as_list else tuple(extra_args), ref)  # type: ignore[arg-type]
    assert admin_call_problem(call) is None
