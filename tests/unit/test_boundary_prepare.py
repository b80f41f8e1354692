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
