"""Black-box tests of ouroactors.supervision.specs: validation and its error messages.

Rules are OTP's ``check_childspec`` / ``check_flags`` (``shared/notes/otp.md`` 1.3, 1.4) plus
ours: unknown keys are refused with a suggestion, actor paths must import, and every problem
names its key path and the allowed values.
"""

from __future__ import annotations

from typing import Any

import pytest

from ouroactors.core.errors import SpecError
from ouroactors.examples.workers import Echo
from ouroactors.supervision.specs import (
    DEFAULT_WORKER_SHUTDOWN_MS,
    SUPERVISOR_ACTOR,
    AutoShutdown,
    ChildSpec,
    ChildType,
    RestartType,
    Strategy,
    actor_path_of,
    build_spec,
    check_childspecs,
    resolve_actor,
    supervisor,
    worker,
)

ECHO = "ouroactors.examples.workers:Echo"


def tree(*children: dict[str, Any], **flags: Any) -> dict[str, Any]:
    return {"id": "root", "type": "supervisor", "children": list(children), **flags}


def w(id: str, **fields: Any) -> dict[str, Any]:
    return {"id": id, "actor": ECHO, **fields}


def problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        build_spec(data)
    return info.value.problems


def error_text(data: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as info:
        build_spec(data)
    return str(info.value)


# -- defaults -------------------------------------------------------------------------------------


def test_worker_defaults_are_otps() -> None:
    spec = build_spec(w("a"))
    assert spec.restart is RestartType.PERMANENT
    assert spec.type is ChildType.WORKER
    assert spec.significant is False
    assert spec.shutdown_ms == DEFAULT_WORKER_SHUTDOWN_MS == 5000
    assert spec.args == () and spec.kwargs == {}
    assert spec.actor_path == ECHO
    assert not spec.is_supervisor


def test_supervisor_defaults_are_otps() -> None:
    spec = build_spec(tree())
    flags = spec.flags
    assert flags.strategy is Strategy.ONE_FOR_ONE
    assert flags.intensity == 1
    assert flags.period == 5
    assert flags.auto_shutdown is AutoShutdown.NEVER
    assert flags.max_children is None
    assert spec.shutdown_ms is None  # infinity for supervisors
    assert spec.actor_path == SUPERVISOR_ACTOR
    assert spec.is_supervisor


@pytest.mark.parametrize(
    ("shutdown", "ms"), [("brutal_kill", 0), ("infinity", None), (0, 0), (1, 1), (250, 250), (None, 5000)]
)
def test_shutdown_values(shutdown: Any, ms: int | None) -> None:
    data = w("a") if shutdown is None else w("a", shutdown=shutdown)
    assert build_spec(data).shutdown_ms == ms


def test_supervisor_shutdown_can_be_set() -> None:
    assert build_spec(tree(shutdown=100)).shutdown_ms == 100


def test_valid_tree_with_all_fields() -> None:
    spec = build_spec(
        tree(
            w("a", args=[1, 2], kwargs={"k": "v"}, restart="transient", shutdown="brutal_kill",
              significant=True, backoff={"min_s": 0.5, "max_s": 2}, requires={"gpu": "yes"}),
            w("b", restart="temporary", significant=True),
            {"id": "sub", "type": "supervisor", "strategy": "simple_one_for_one", "max_children": 3,
             "children": [w("tmpl")]},
            strategy="rest_for_one", intensity=0, period=0.5, auto_shutdown="all_significant",
        )
    )
    assert spec.flags.strategy is Strategy.REST_FOR_ONE
    assert spec.flags.intensity == 0 and spec.flags.period == 0.5
    a, b, sub = spec.children or ()
    assert b.restart is RestartType.TEMPORARY
    assert a.args == (1, 2) and a.kwargs == {"k": "v"}
    assert a.backoff is not None and a.backoff.max_s == 2
    assert sub.flags.max_children == 3


# -- every bad-input clause -----------------------------------------------------------------------


def test_missing_id() -> None:
    assert ("children[0].id", "is required") in problems(tree({"actor": ECHO}))
    assert ("id", "is required") in problems({"type": "supervisor"})


def test_empty_id() -> None:
    [(loc, _)] = problems(tree(w("")))
    assert loc == "children[0].id"


def test_unknown_restart_type_names_the_key_path_and_the_allowed_values() -> None:
    [(loc, msg)] = problems(tree(w("a"), w("b", restart="sometimes")))
    assert loc == "children[1].restart"
    for allowed in ("permanent", "transient", "temporary"):
        assert allowed in msg
    assert msg.endswith("got 'sometimes'")  # the value given, for every closed choice
    assert "children[1].restart" in error_text(tree(w("a"), w("b", restart="sometimes")))


@pytest.mark.parametrize(("data", "loc", "given"), [
    (tree(w("a"), strategy="one_for_al"), "strategy", "'one_for_al'"),
    (tree(w("a"), auto_shutdown="sometimes"), "auto_shutdown", "'sometimes'"),
    (tree(w("a", restart="prmanent")), "children[0].restart", "'prmanent'"),
    (tree(w("a", type="wrker")), "children[0].type", "'wrker'"),
    (tree(w("a", shutdown="brutal")), "children[0].shutdown", "'brutal'"),
    (tree(w("a"), intensity="three"), "intensity", "'three'"),
    (tree(w("a"), period=-1), "period", "-1"),
    (tree(w("a", significant="yes")), "children[0].significant", "'yes'"),
    (tree(w("a", backoff={"min_s": "x"})), "children[0].backoff.min_s", "'x'"),
])
def test_every_wrong_value_is_named_in_its_error(data: dict[str, Any], loc: str, given: str) -> None:
    [(where, msg)] = problems(data)
    assert where == loc
    assert msg.endswith(f"; got {given}"), msg


def test_a_project_that_is_not_on_the_import_path_is_told_what_to_do() -> None:
    [(loc, msg)] = problems(tree(w("a", actor="no_such_project_xyz.store:Store")))
    assert loc == "children[0].actor"
    assert "No module named 'no_such_project_xyz'" in msg and "PYTHONPATH" in msg and "pip install -e ." in msg


@pytest.mark.parametrize("bad", [-1, -5000, "soon", "Brutal_Kill", 1.5, [1]])
def test_bad_shutdown(bad: Any) -> None:
    [(loc, msg)] = problems(tree(w("a", shutdown=bad)))
    assert loc == "children[0].shutdown"
    assert msg == f"must be a number of milliseconds >= 0, 'brutal_kill' or 'infinity'; got {bad!r}"



def test_bool_shutdown_is_refused() -> None:
    problems(tree(w("a", shutdown=True)))


def test_duplicate_ids_are_refused_naming_the_id() -> None:
    [(_loc, msg)] = problems(tree(w("a"), w("b"), w("a")))
    assert msg == "duplicate child id 'a'"



@pytest.mark.parametrize(("bad", "why"), [
    ("a/b", "holds '/'"),            # app/a/b would be `b` under `a`: this child could never be addressed
    ("../x", "holds '/'"),
    ("a\nexited b", "not printable"),  # a forged line in the event log or the CLI's output
    ("a\x1b[2J", "not printable"),   # a terminal escape
    (" a", "blank"),
    ("a\t", "not printable"),
    ("x" * 1025, "must be 1 to 1024 characters, not 1025"),
])
def test_an_id_that_cannot_be_a_part_of_a_path_is_refused_with_why(bad: str, why: str) -> None:
    [(loc, msg)] = problems(tree(w("ok"), w(bad)))
    assert loc == "children[1].id"
    assert why in msg


def test_the_root_id_is_checked_too() -> None:
    [(loc, msg)] = problems({**tree(w("a")), "id": "app/x"})
    assert (loc, "holds '/'" in msg) == ("id", True)


def test_ids_with_other_printable_characters_are_kept() -> None:
    spec = build_spec(tree(w("runtime#1"), w("café-2"), w("a b"), w("x" * 1024)))
    assert [c.id for c in spec.children or ()] == ["runtime#1", "café-2", "a b", "x" * 1024]


def test_a_slash_in_an_id_of_a_tree_file_is_refused() -> None:
    from ouroactors.system.config import parse_tree

    with pytest.raises(SpecError) as info:
        parse_tree(f'[tree]\nid = "app"\n[[tree.children]]\nid = "a/b"\nactor = "{ECHO}"\n', "t.toml")
    assert info.value.problems == [("tree.children[0].id", "'a/b' holds '/', which separates the parts of a path "
                                                           "(app/store): an id cannot hold one")]


def test_duplicate_id_error_names_the_key_path_of_the_second_occurrence() -> None:
    [(loc, _msg)] = problems(tree(w("a"), w("b"), w("a")))
    assert loc == "children[2].id"


def test_duplicate_ids_in_a_nested_supervisor_name_the_nested_path() -> None:
    nested = {"id": "sub", "type": "supervisor", "children": [w("x"), w("x")]}
    [(loc, msg)] = problems(tree(w("a"), nested))
    assert loc == "children[1].children[1].id"
    assert "'x'" in msg


def test_same_id_in_different_supervisors_is_fine() -> None:
    build_spec(tree(w("a"), {"id": "sub", "type": "supervisor", "children": [w("a")]}))


def test_significant_permanent_is_a_bad_combination() -> None:
    [(loc, msg)] = problems(tree(w("a", significant=True), auto_shutdown="any_significant"))
    assert loc == "children[0]"
    assert "significant" in msg and "permanent" in msg


@pytest.mark.parametrize("restart", ["transient", "temporary"])
def test_significant_with_auto_shutdown_never_is_refused(restart: str) -> None:
    [(_loc, msg)] = problems(tree(w("ok"), w("a", significant=True, restart=restart)))
    assert "children[1]" in msg and "'a'" in msg and "never" in msg


@pytest.mark.parametrize("policy", ["any_significant", "all_significant"])
def test_significant_with_auto_shutdown_is_fine(policy: str) -> None:
    build_spec(tree(w("a", significant=True, restart="transient"), auto_shutdown=policy))


@pytest.mark.parametrize("period", [0, -1, -0.5])
def test_non_positive_period(period: float) -> None:
    [(loc, msg)] = problems(tree(period=period))
    assert loc == "period"
    assert "greater than 0" in msg


def test_non_positive_period_of_a_nested_supervisor_names_its_path() -> None:
    [(loc, _)] = problems(tree(w("a"), {"id": "s", "type": "supervisor", "period": 0}))
    assert loc == "children[1].period"



def test_infinite_period_is_refused() -> None:
    problems(tree(period=float("inf")))


@pytest.mark.parametrize("intensity", [-1, -100])
def test_negative_intensity(intensity: int) -> None:
    [(loc, msg)] = problems(tree(intensity=intensity))
    assert loc == "intensity"
    assert "greater than or equal to 0" in msg


def test_intensity_must_be_an_integer() -> None:
    [(loc, _)] = problems(tree(intensity="many"))
    assert loc == "intensity"
    [(loc, _)] = problems(tree(intensity=1.5))
    assert loc == "intensity"



def test_bool_intensity_is_refused() -> None:
    problems(tree(intensity=True))



def test_non_boolean_significant_is_refused() -> None:
    problems(tree(w("a", significant="yes", restart="transient"), auto_shutdown="any_significant"))


def test_unknown_strategy_lists_the_allowed_values() -> None:
    [(loc, msg)] = problems(tree(strategy="one_for_some"))
    assert loc == "strategy"
    for allowed in Strategy:
        assert allowed.value in msg


def test_unknown_auto_shutdown_lists_the_allowed_values() -> None:
    [(loc, msg)] = problems(tree(auto_shutdown="sometimes"))
    assert loc == "auto_shutdown"
    for allowed in AutoShutdown:
        assert allowed.value in msg


def test_unknown_type_lists_the_allowed_values() -> None:
    [(loc, msg)] = problems(tree(w("a", type="actor")))
    assert loc == "children[0].type"
    assert "worker" in msg and "supervisor" in msg


def test_actor_path_that_does_not_import() -> None:
    [(loc, msg)] = problems(tree(w("a"), {"id": "b", "actor": "no_such_module_xyz:Thing"}))
    assert loc == "children[1].actor"
    assert "does not import" in msg and "no_such_module_xyz" in msg


def test_actor_path_with_a_missing_attribute() -> None:
    [(loc, msg)] = problems(tree({"id": "b", "actor": "ouroactors.examples.workers:Nope"}))
    assert loc == "children[0].actor"
    assert "has no attribute 'Nope'" in msg


def test_actor_path_that_is_not_an_ouroactors_actor() -> None:
    [(loc, msg)] = problems(tree({"id": "b", "actor": "collections:OrderedDict"}))
    assert loc == "children[0].actor"
    assert "not an ouroactors actor" in msg


def test_actor_path_that_is_a_function_not_a_class() -> None:
    [(_, msg)] = problems(tree({"id": "b", "actor": "os.path:join"}))
    assert "not an ouroactors actor" in msg


@pytest.mark.parametrize("path", ["Echo", ":Echo", "ouroactors.examples.workers:"])
def test_actor_path_without_module_or_class(path: str) -> None:
    [(_, msg)] = problems(tree({"id": "b", "actor": path}))
    assert "must look like 'package.module:Class'" in msg


def test_dotted_actor_paths_resolve_too() -> None:
    assert resolve_actor("ouroactors.examples.workers.Echo") is Echo
    assert resolve_actor(ECHO) is Echo
    assert resolve_actor(SUPERVISOR_ACTOR).__name__ == "Supervisor"


def test_unknown_key_with_a_suggestion() -> None:
    [(loc, msg)] = problems(tree(w("a", restrat="temporary")))
    assert loc == "children[0].restrat"
    assert msg == "unknown key 'restrat' (did you mean 'restart'?)"


def test_unknown_flag_with_a_suggestion() -> None:
    [(loc, msg)] = problems(tree(intensty=3))
    assert loc == "intensty"
    assert "did you mean 'intensity'?" in msg


def test_unknown_key_in_backoff_with_a_suggestion() -> None:
    [(loc, msg)] = problems(tree(w("a", backoff={"mins": 1})))
    assert loc == "children[0].backoff.mins"
    assert "did you mean 'min_s'?" in msg


def test_unknown_key_without_a_close_match_has_no_suggestion() -> None:
    [(_, msg)] = problems(tree(w("a", zzzzzz=1)))
    assert msg == "unknown key 'zzzzzz'"


def test_worker_without_actor() -> None:
    [(loc, msg)] = problems(tree({"id": "a"}))
    assert loc == "children[0]"
    assert "needs 'actor'" in msg


@pytest.mark.parametrize(
    "field", [("strategy", "one_for_all"), ("intensity", 3), ("period", 2), ("auto_shutdown", "never"),
              ("max_children", 3), ("children", [])]
)
def test_worker_with_supervisor_only_fields(field: tuple[str, Any]) -> None:
    name, value = field
    [(loc, msg)] = problems(tree(w("a", **{name: value})))
    assert loc == "children[0]"
    assert name in msg and "supervisor" in msg


@pytest.mark.parametrize("count", [0, 2, 3])
def test_simple_one_for_one_needs_exactly_one_child(count: int) -> None:
    children = [w(f"c{i}") for i in range(count)]
    [(_, msg)] = problems(tree(*children, strategy="simple_one_for_one"))
    assert "exactly one child spec" in msg and f"got {count}" in msg


def test_simple_one_for_one_refuses_auto_shutdown() -> None:
    msgs = [m for _, m in problems(tree(w("t"), strategy="simple_one_for_one", auto_shutdown="any_significant"))]
    assert any("simple_one_for_one" in m for m in msgs)


@pytest.mark.parametrize("strategy", ["one_for_one", "one_for_all", "rest_for_one"])
def test_max_children_on_a_non_simple_supervisor(strategy: str) -> None:
    [(_, msg)] = problems(tree(w("a"), strategy=strategy, max_children=2))
    assert "max_children" in msg and "simple_one_for_one" in msg


def test_max_children_must_be_positive() -> None:
    [(loc, _)] = problems(tree(w("t"), strategy="simple_one_for_one", max_children=0))
    assert loc == "max_children"


def test_backoff_min_greater_than_max() -> None:
    [(loc, msg)] = problems(tree(w("a", backoff={"min_s": 5, "max_s": 1})))
    assert loc == "children[0].backoff"
    assert "max_s" in msg and "min_s" in msg


def test_several_problems_are_all_reported_with_their_paths() -> None:
    found = problems(tree(w("a", restart="x"), w("b", shutdown=-1), intensity=-1))
    locations = {loc for loc, _ in found}
    assert {"children[0].restart", "children[1].shutdown", "intensity"} <= locations


def test_error_text_names_the_source() -> None:
    with pytest.raises(SpecError) as info:
        build_spec(tree(w("a", restart="x")), source="tree.toml")
    assert info.value.source == "tree.toml"
    assert "tree.toml: children[0].restart:" in str(info.value)


def test_spec_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        build_spec(tree(w("a", restart="x")))


def test_errors_deep_in_a_tree_name_the_full_key_path() -> None:
    deep = tree(w("a"), {"id": "s", "type": "supervisor", "children": [w("b"), w("c", restart="never")]})
    [(loc, _)] = problems(deep)
    assert loc == "children[1].children[1].restart"


# -- Python-built tree equals the dict-built tree --------------------------------------------------


def test_python_built_tree_equals_dict_built_tree() -> None:
    built = supervisor(
        "root",
        [
            worker("a", Echo, restart="transient", significant=True, args=(1,)),
            worker("b", ECHO, shutdown="brutal_kill"),
            supervisor("pool", [worker("t", Echo)], strategy="simple_one_for_one", max_children=4),
        ],
        strategy="rest_for_one",
        intensity=3,
        auto_shutdown="any_significant",
    )
    loaded = build_spec(
        tree(
            w("a", restart="transient", significant=True, args=[1]),
            w("b", shutdown="brutal_kill"),
            {"id": "pool", "type": "supervisor", "strategy": "simple_one_for_one", "max_children": 4,
             "children": [w("t")]},
            strategy="rest_for_one", intensity=3, auto_shutdown="any_significant",
        )
    )
    assert built == loaded


def test_worker_helper_validates_too() -> None:
    with pytest.raises(SpecError):
        worker("a", Echo, restart="x")
    with pytest.raises(SpecError):
        supervisor("s", [worker("a", Echo), worker("a", Echo)])


def test_actor_path_of() -> None:
    assert actor_path_of(Echo) == ECHO
    assert actor_path_of("x.y:Z") == "x.y:Z"


def test_specs_are_frozen() -> None:
    spec = worker("a", Echo)
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen-instance error type
        spec.restart = RestartType.TEMPORARY  # type: ignore[misc]


def test_spec_round_trips_through_model_dump() -> None:
    spec = build_spec(tree(w("a", restart="transient"), strategy="one_for_all"))
    assert ChildSpec.model_validate(spec.model_dump()) == spec


# -- check_childspecs -------------------------------------------------------------------------------


def test_check_childspecs_accepts_valid_specs_objects_and_dicts() -> None:
    check_childspecs([worker("a", Echo), w("b")])
    check_childspecs([])


def test_check_childspecs_refuses_duplicates() -> None:
    with pytest.raises(SpecError, match="duplicate child id 'a'"):
        check_childspecs([worker("a", Echo), worker("a", Echo)])


def test_check_childspecs_refuses_a_bad_spec_with_its_path() -> None:
    with pytest.raises(SpecError) as info:
        check_childspecs([w("a"), w("b", restart="x")])
    assert info.value.problems[0][0] == "children[1].restart"


def test_check_childspecs_uses_the_auto_shutdown_argument() -> None:
    significant = w("a", significant=True, restart="transient")
    with pytest.raises(SpecError, match="never"):
        check_childspecs([significant])
    check_childspecs([significant], "any_significant")
    check_childspecs([significant], "all_significant")


def test_check_childspecs_accepts_a_nested_supervisor_spec_object() -> None:
    check_childspecs([supervisor("s", [worker("a", Echo)], strategy="one_for_all")])


def test_an_actor_path_naming_a_module_or_a_near_miss_says_which() -> None:
    [(loc, msg)] = problems(tree(w("a", actor="ouroactors.examples.workers")))
    assert loc == "children[0].actor"
    assert "names a module: name a class in it ('ouroactors.examples.workers:Class')" in msg
    [(_, msg)] = problems(tree(w("a", actor="ouroactors.examples.workers:Ecko")))
    assert msg.endswith("has no attribute 'Ecko' (did you mean 'Echo'?)")
    [(_, msg)] = problems(tree(w("a", actor="ouroactors.examples.workers:Zzz")))
    assert msg.endswith("has no attribute 'Zzz'")  # nothing close: no guess
    [(_, msg)] = problems(tree(w("a", actor="ouroactors.supervision.specs:MAX_CHILD_ID_CHARS.x")))
    assert "has no attribute" in msg  # an owner with no __dict__ of names: no crash


COUNTER = "ouroactors.examples.workers:Counter"  # on_start(self, start: int = 0)


def test_arguments_on_start_cannot_take_are_refused_when_the_tree_is_checked() -> None:
    [(loc, msg)] = problems(tree(w("c", actor=COUNTER, kwargs={"strat": 10})))
    assert loc == "children[0].kwargs"
    assert msg == "Counter.on_start(start=0) cannot take them: got an unexpected keyword argument 'strat'"
    [(loc, msg)] = problems(tree(w("ok", actor=COUNTER), w("c", actor=COUNTER, args=(1, 2))))
    assert loc == "children[1].args" and "too many positional arguments" in msg
    needs = "ouroactors.examples.workers:FailsWhenFlagged"  # on_start(self, flag: str)
    [(loc, msg)] = problems(tree(w("f", actor=needs)))
    assert loc == "children[0].args" and "missing a required argument: 'flag'" in msg


def test_arguments_that_fit_pass_and_a_templates_need_only_begin_them() -> None:
    build_spec(tree(w("c", actor=COUNTER, kwargs={"start": 3}), w("d", actor=COUNTER, args=(4,)), w("e")))
    pool = {"id": "pool", "type": "supervisor", "strategy": "simple_one_for_one",
            "children": [w("f", actor="ouroactors.examples.workers:FailsWhenFlagged")]}  # start_child gives the flag
    build_spec(tree(pool))
    too_many = {**pool, "children": [w("c", actor=COUNTER, args=(1, 2))]}
    [(loc, _msg)] = problems(tree(too_many))
    assert loc == "children[0].children[0].args"
