"""Tree files that used to pass ``check`` and fail later, or fail ``check`` with a traceback (a user's review):

1. a child whose actor class is not of the kind its ``type`` needs (a Worker as a supervisor: every status through it
   timed out; a Supervisor as a worker);
2. an actor module that calls ``sys.exit()`` when imported (``check`` exited 0, silently);
3. a tree file whose ``[tree]``, ``[system]`` or ``children`` is of the wrong kind, or which is not UTF-8;
4. a ``start_timeout``, timed ``shutdown`` or ``backoff`` delay longer than a timer can hold;
5. only the first child whose ``on_start`` could not take its arguments was named.

Each is refused with its key path, the value given and what is allowed; ``check`` exits 2 without a traceback.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ouroactors.cli import main
from ouroactors.core.errors import SpecError
from ouroactors.examples.workers import Echo
from ouroactors.supervision.actor_paths import actor_kind, resolve_actor
from ouroactors.supervision.specs import MAX_TIMER_MS, MAX_TIMER_S, ChildSpec, build_spec, supervisor, worker
from ouroactors.supervision.supervisor import Supervisor
from ouroactors.system.config import load_tree, parse_tree

ECHO = "ouroactors.examples.workers:Echo"
COUNTER = "ouroactors.examples.workers:Counter"  # on_start(self, start: int = 0)
SUPERVISOR = "ouroactors.supervision.supervisor:Supervisor"
_names = itertools.count()


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        parse_tree(text, "app.toml")
    return list(info.value.problems)


def child(id: str, actor: str = ECHO, extra: str = "", table: str = "tree.children") -> str:
    return f'[[{table}]]\nid = "{id}"\nactor = "{actor}"\n{extra}'


ROOT = '[tree]\nid = "app"\n'


def check(tmp_path: Path, text: str | bytes) -> Any:
    """``ouroactors check`` on a file holding ``text``: its result (exit code, output, exception)."""
    tree = tmp_path / "tree.toml"
    tree.write_bytes(text if isinstance(text, bytes) else text.encode())
    return CliRunner().invoke(main, ["check", str(tree)])


def assert_refused(result: Any, *texts: str) -> None:
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)  # sys.exit(2), not an exception escaping
    assert "Traceback" not in result.output
    for text in texts:
        assert text in result.output, result.output


# -- 1. the actor's class kind and the child's type ------------------------------------------------------------


def test_a_worker_class_as_a_supervisor_child_is_refused_naming_both_kinds() -> None:
    [(loc, msg)] = problems(ROOT + child("s", ECHO, 'type = "supervisor"\n'))
    assert loc == "tree.children[0].actor"
    assert msg.startswith("type = 'supervisor' needs a Supervisor subclass (ouroactors.Supervisor); "
                          f"got {ECHO!r}, a Worker"), msg


def test_a_supervisor_class_as_a_worker_child_is_refused_naming_both_kinds() -> None:
    for extra in ("", 'type = "worker"\n'):
        [(loc, msg)] = problems(ROOT + child("w", SUPERVISOR, extra))
        assert loc == "tree.children[0].actor"
        assert msg.startswith(f"type = 'worker' needs a Worker subclass (ouroactors.Worker); got {SUPERVISOR!r}, "
                              "a Supervisor"), msg


def test_a_simple_one_for_one_template_counts_as_what_its_own_type_says() -> None:
    pool = '[[tree.children]]\nid = "pool"\ntype = "supervisor"\nstrategy = "simple_one_for_one"\n'
    [(loc, msg)] = problems(ROOT + pool + child("t", SUPERVISOR, table="tree.children.children"))
    assert loc == "tree.children[0].children[0].actor" and "needs a Worker subclass" in msg
    [(loc, msg)] = problems(ROOT + pool + child("t", ECHO, 'type = "supervisor"\n', "tree.children.children"))
    assert loc == "tree.children[0].children[0].actor" and "needs a Supervisor subclass" in msg
    parse_tree(ROOT + pool + child("t", SUPERVISOR, 'type = "supervisor"\n', "tree.children.children"))
    parse_tree(ROOT + pool + child("t", ECHO, table="tree.children.children"))


def test_the_root_and_python_built_specs_are_checked_too() -> None:
    [(loc, msg)] = problems(ROOT + f'actor = "{ECHO}"\n')
    assert loc == "tree.actor" and "needs a Supervisor subclass" in msg
    with pytest.raises(SpecError, match="needs a Worker subclass"):
        worker("w", Supervisor)
    with pytest.raises(SpecError, match="needs a Supervisor subclass"):
        supervisor("s", actor=Echo)


def test_matching_kinds_pass_and_a_kind_is_told_from_the_class() -> None:
    spec = parse_tree(ROOT + child("s", SUPERVISOR, 'type = "supervisor"\n') + child("w", ECHO)).tree
    assert [c.id for c in spec.children or ()] == ["s", "w"]
    assert (actor_kind(Echo), actor_kind(Supervisor), actor_kind(int)) == ("worker", "supervisor", None)


def test_check_refuses_a_kind_mismatch_with_exit_2(tmp_path: Path) -> None:
    assert_refused(check(tmp_path, ROOT + child("s", ECHO, 'type = "supervisor"\n')),
                   "tree.children[0].actor", "needs a Supervisor subclass")


# -- 2. sys.exit() when the actor's module is imported ---------------------------------------------------------


def exiting_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> str:
    name = f"exits_on_import_{next(_names)}"
    (tmp_path / f"{name}.py").write_text(f"import sys\n{body}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"{name}:Actor"


@pytest.mark.parametrize(("body", "shown"), [("sys.exit(0)", "SystemExit: 0"), ("sys.exit()", "SystemExit: None"),
                                             ("sys.exit('no config')", "SystemExit: 'no config'")])
def test_an_actor_module_that_exits_on_import_does_not_import(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, shown: str) -> None:
    path = exiting_module(tmp_path, monkeypatch, body)
    [(loc, msg)] = problems(ROOT + child("a", path))
    assert loc == "tree.children[0].actor"
    assert msg.startswith(f"actor path {path!r} does not import: {shown}"), msg


def test_check_reports_an_exiting_module_with_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = exiting_module(tmp_path, monkeypatch, "sys.exit(0)")
    assert_refused(check(tmp_path, ROOT + child("a", path)), "does not import: SystemExit: 0")


def test_a_keyboard_interrupt_while_importing_is_not_swallowed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = exiting_module(tmp_path, monkeypatch, "raise KeyboardInterrupt")
    with pytest.raises(KeyboardInterrupt):
        resolve_actor(path)


# -- 3. malformed tree files -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "got"), [
    ("tree = 5\n", "got int 5"),
    ("tree = true\n", "got bool True"),
    ('tree = "ab"\n', "got str 'ab'"),
    ('tree = [["id", "x"]]\n', "got list [['id', 'x']]"),
])
def test_a_tree_that_is_not_a_table_is_refused(text: str, got: str) -> None:
    assert problems(text) == [("tree", f"must be a table ([tree] with id and children), {got}")]


def test_a_system_that_is_not_a_table_is_refused() -> None:
    assert problems("system = 3\n" + ROOT) == [("system", "must be a table ([system] with base and data_dir), "
                                                          "got int 3")]
    assert [loc for loc, _ in problems('system = "x"\ntree = 1\n')] == ["system", "tree"]


@pytest.mark.parametrize("value", ["5", '"ab"', '{ id = "x" }'])
def test_children_that_are_not_a_list_are_refused(value: str) -> None:
    [(loc, msg)] = problems(ROOT + f"children = {value}\n")
    assert loc == "tree.children"
    assert msg.startswith("must be a list of child specs (in TOML, one [[...children]] table each), got "), msg


def test_children_that_are_not_tables_are_refused_each() -> None:
    assert problems(ROOT + 'children = [1, "x"]\n') == [
        ("tree.children[0]", "must be a table (a child spec), got int 1"),
        ("tree.children[1]", "must be a table (a child spec), got str 'x'"),
    ]
    nested = ROOT + '[[tree.children]]\nid = "s"\ntype = "supervisor"\nchildren = [[1]]\n'
    assert problems(nested) == [("tree.children[0].children[0]", "must be a table (a child spec), got list [1]")]


def test_kwargs_and_backoff_of_the_wrong_kind_say_so() -> None:
    found = dict(problems(ROOT + child("a", ECHO, "kwargs = 5\nbackoff = 1\n")))
    assert found == {"tree.children[0].kwargs": "must be a table, got int 5",
                     "tree.children[0].backoff": "must be a table, got int 1"}


def test_a_tree_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"\xff\xfe[tree]\n")
    with pytest.raises(SpecError) as info:
        load_tree(bad)
    assert info.value.problems == [("", "cannot read tree file: not valid UTF-8 (byte 0xff at offset 0); a tree "
                                        "file is TOML, which is UTF-8")]
    assert_refused(check(tmp_path, b"\xff\xfe[tree]\n"), "not valid UTF-8")


@pytest.mark.parametrize("text", ["tree = 5\n", "tree = true\n", 'tree = "ab"\n', "system = 3\n" + ROOT,
                                  ROOT + "children = 5\n", ROOT + "children = [1]\n"])
def test_check_refuses_malformed_files_with_exit_2(tmp_path: Path, text: str) -> None:
    assert_refused(check(tmp_path, text), "invalid supervision spec")


# -- 4. durations that become timers ---------------------------------------------------------------------------


def test_the_cap_is_below_what_a_timer_holds() -> None:
    assert MAX_TIMER_S == 24 * 24 * 3600 and MAX_TIMER_MS == MAX_TIMER_S * 1000 < 2**31 - 1


@pytest.mark.parametrize("value", ["2147484", "2073601", "1e308", "inf", "nan", "0", "-1"])
def test_a_start_timeout_out_of_range_is_refused(value: str) -> None:
    [(loc, msg)] = problems(ROOT + child("a", ECHO, f"start_timeout = {value}\n"))
    assert loc == "tree.children[0].start_timeout"
    assert msg.startswith(f"must be a number of seconds > 0 and <= {MAX_TIMER_S} (24 days), or 'infinity' "), msg
    assert f"got {float(value)!r}" in msg or (math.isnan(float(value)) and "got nan" in msg), msg


@pytest.mark.parametrize("value", [MAX_TIMER_S, 0.5, "infinity"])
def test_a_start_timeout_in_range_passes(value: Any) -> None:
    assert worker("a", ECHO, start_timeout=value).start_timeout == value


def test_a_timed_shutdown_longer_than_a_timer_is_refused() -> None:
    [(loc, msg)] = problems(ROOT + child("a", ECHO, f"shutdown = {MAX_TIMER_MS + 1}\n"))
    assert loc == "tree.children[0].shutdown"
    assert msg == (f"a timed shutdown is at most {MAX_TIMER_MS} ms (24 days): a longer timer overflows; 'infinity' "
                   f"waits without one; got {MAX_TIMER_MS + 1}")
    assert worker("a", ECHO, shutdown=MAX_TIMER_MS).shutdown_ms == MAX_TIMER_MS


@pytest.mark.parametrize(("backoff", "why"), [
    ("{ max_s = 2000000 }", "the longest delay, max_s * (1 + jitter) = 2.2e+06 s, must be at most 2073600 s"),
    ("{ max_s = inf }", "Input should be a finite number; got inf"),
    ("{ min_s = nan }", "Input should be a finite number; got nan"),
])
def test_a_backoff_longer_than_a_timer_is_refused(backoff: str, why: str) -> None:
    [(loc, msg)] = problems(ROOT + child("a", ECHO, f"backoff = {backoff}\n"))
    assert loc in ("tree.children[0].backoff.max_s", "tree.children[0].backoff.min_s")
    assert msg.startswith(why), msg
    assert worker("a", ECHO, backoff={"max_s": MAX_TIMER_S / 2, "jitter": 1}).backoff is not None


# -- 5. every child whose on_start cannot take its arguments ---------------------------------------------------


def test_every_child_whose_arguments_do_not_fit_is_named() -> None:
    text = (ROOT + child("a", COUNTER, "kwargs = { strat = 1 }\n") + child("ok", COUNTER)
            + child("b", COUNTER, "args = [1, 2]\n"))
    assert problems(text) == [
        ("tree.children[0].kwargs", "Counter.on_start(start=0) cannot take them: got an unexpected keyword "
                                    "argument 'strat'"),
        ("tree.children[2].args", "Counter.on_start(start=0) cannot take them: too many positional arguments"),
    ]


def test_arguments_are_named_in_every_subtree_and_beside_other_problems() -> None:
    sub = '[[tree.children]]\nid = "sub"\ntype = "supervisor"\n'
    text = (ROOT + child("a", COUNTER, "kwargs = { strat = 1 }\n") + child("b", "no_such_module_xyz:Store")
            + sub + child("c", COUNTER, "kwargs = { x = 1 }\n", "tree.children.children")
            + child("d", COUNTER, 'kwargs = { y = 1 }\nrestart = "x"\n', "tree.children.children"))
    assert [loc for loc, _ in problems(text)] == [
        "tree.children[0].kwargs", "tree.children[1].actor", "tree.children[2].children[0].kwargs",
        "tree.children[2].children[1].restart", "tree.children[2].children[1].kwargs",
    ]


def test_a_supervisor_validated_on_its_own_names_every_child_too() -> None:
    data = {"id": "root", "type": "supervisor", "children": [
        {"id": "a", "actor": COUNTER, "kwargs": {"strat": 1}}, {"id": "b", "actor": COUNTER, "args": [1, 2]}]}
    with pytest.raises(ValueError) as info:  # pydantic's ValidationError, as the admin door sees it
        ChildSpec.model_validate(data)
    assert "children[0].kwargs" in str(info.value) and "children[1].args" in str(info.value)
    with pytest.raises(SpecError) as spec_error:
        build_spec(data)
    assert [loc for loc, _ in spec_error.value.problems] == ["children[0].kwargs", "children[1].args"]


def test_check_lists_every_child_whose_arguments_do_not_fit(tmp_path: Path) -> None:
    text = ROOT + child("a", COUNTER, "kwargs = { strat = 1 }\n") + child("b", COUNTER, "kwargs = { strt = 1 }\n")
    assert_refused(check(tmp_path, text), "tree.children[0].kwargs", "tree.children[1].kwargs", "'strt'")
