"""boundary.prepare: a message class's annotations resolved ahead of its first message, changing no verdict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import pytest

from ouroactors.core import boundary
from ouroactors.core.boundary import Size, check_message
from ouroactors.core.errors import BadRequest


@dataclass(frozen=True)
class Leaf:
    label: Annotated[str, Size(1, 8)]


@dataclass(frozen=True)
class Branch:
    leaves: tuple[Leaf, ...] = ()


@dataclass(frozen=True)
class Root:
    branch: Branch | None
    count: int = 0


@dataclass(frozen=True)
class Broken:
    what: NoSuchType  # type: ignore[name-defined]  # noqa: F821  # an annotation that does not resolve


def _forget(*classes: type) -> None:
    for cls in classes:
        boundary._HINTS.pop(cls, None)
        boundary._FIELDS.pop(cls, None)


def test_prepare_resolves_a_class_and_every_message_class_its_fields_hold():
    _forget(Root, Branch, Leaf)
    boundary.prepare(Root)
    assert all(cls in boundary._HINTS and cls in boundary._FIELDS for cls in (Root, Branch, Leaf))


def test_the_door_gives_the_same_verdicts_after_prepare():
    good = Root(Branch((Leaf("a"), Leaf("b"))), 2)
    bad = Root(Branch((Leaf("a"), Leaf("far too long"))))
    _forget(Root, Branch, Leaf)
    before = check_message(good)
    with pytest.raises(BadRequest) as first:
        check_message(bad)
    _forget(Root, Branch, Leaf)
    boundary.prepare(Root)
    assert check_message(good) == before
    with pytest.raises(BadRequest) as second:
        check_message(bad)
    assert str(second.value) == str(first.value) and "branch.leaves[1].label" in str(second.value)


def test_a_class_whose_annotations_do_not_resolve_is_left_to_its_first_message():
    boundary.prepare(Broken, int, "not a class")  # type: ignore[arg-type]  # nothing raised, nothing cached
    assert Broken not in boundary._HINTS
    with pytest.raises(NameError, match="NoSuchType"):  # the first message meets it, as without prepare
        check_message(Broken("x"))


def _open(**changes: object) -> object:
    from ouroactors.runtime.execution.messages import OpenSession

    fields = dict(session_id="s1", config={"workspace": "/w"}, lease_id="l1", subscriber=None, start=0,
                  state_version=0, park_approvals=True, answered=(), answered_asks=(), tail_turn=0)
    fields.update(changes)
    return OpenSession(**fields)  # type: ignore[arg-type]


BAD_OPENS = {
    "session id None": dict(session_id=None),
    "session id over-long": dict(session_id="s" * 10_000),
    "session id with a path": dict(session_id="../../etc"),
    "config key over-long": dict(config={"k" * 100_000: 1}),
    "start huge": dict(start=2**80),
    "start negative": dict(start=-1),
    "state version a string": dict(state_version="0"),
    "park_approvals an int": dict(park_approvals=1),
    "answered not a tuple": dict(answered="a1"),
    "answered asks too many": dict(answered_asks=("d" * 64,) * 65),
    "an answered ask empty": dict(answered_asks=("",)),
}


@pytest.mark.parametrize("case", sorted(BAD_OPENS))
def test_a_session_runtimes_door_refuses_bad_opens_the_same_once_prepared(case):
    """The runtime's door, its checks resolved in the execution supervisor (inherited by every runtime): each bad
    OpenSession is a typed BadRequest naming the field, exactly as before prepare — never a crash."""
    from ouroactors.runtime.execution.runtime import Runtime

    bad = _open(**BAD_OPENS[case])
    _forget(*boundary._HINTS)  # as a process that never checked a message
    with pytest.raises(BadRequest) as cold:
        check_message(bad)
    _forget(*boundary._HINTS)
    boundary.prepare(*Runtime.protocol)
    with pytest.raises(BadRequest) as prepared:
        check_message(bad)
    assert str(prepared.value) == str(cold.value)
    field = next(iter(BAD_OPENS[case]))
    assert field in str(prepared.value)


@pytest.mark.parametrize("config", [["workspace"], {"limits": {"turn_deadline_s": float("inf")}},
                                    {"limits": {"turn_deadline_s": float("nan")}}, {"limits": {"max_turns": 2**80}}])
def test_what_the_door_lets_through_in_a_config_the_open_refuses_by_key_path(config):
    """The door checks a config only as data (its table is the open's to validate): a list, a non-finite deadline,
    a huge limit are refused there, typed, naming the key, before anything is built or written."""
    from ouroactors.core.errors import SpecError
    from ouroactors.runtime.execution.config import parse_session_config

    with pytest.raises(SpecError, match="session s1"):
        parse_session_config(config, "session s1")
