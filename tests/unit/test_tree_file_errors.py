"""A tree file's ``[system]`` table and root are reported like the tree's children: the key path, the
allowed values and the value given (issue 15: every enum field names what it got)."""

from __future__ import annotations

import pytest

from ouroactors.core.errors import SpecError
from ouroactors.system.config import parse_tree

ROOT = '[tree]\nid = "app"\n'


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        parse_tree(text, "app.toml")
    return list(info.value.problems)


def test_a_wrong_base_names_the_value_given() -> None:
    [(loc, msg)] = problems('[system]\nbase = "multi"\n' + ROOT)
    assert loc == "system.base"
    assert "'multiproc'" in msg and "'simple'" in msg and msg.endswith("; got 'multi'"), msg


def test_a_wrong_type_in_system_names_the_value_given() -> None:
    [(loc, msg)] = problems("[system]\ndata_dir = 3\n" + ROOT)
    assert (loc, msg.endswith("; got 3")) == ("system.data_dir", True), msg


def test_an_unknown_system_key_gets_the_nearest_valid_one() -> None:
    [(loc, msg)] = problems('[system]\ndat_dir = "x"\n' + ROOT)
    assert (loc, msg) == ("system.dat_dir", "unknown key 'dat_dir' (did you mean 'data_dir'?)")


def test_a_root_that_is_not_a_supervisor_names_its_type() -> None:
    [(loc, msg)] = problems(ROOT + 'type = "worker"\n')
    assert loc == "tree.type" and msg.endswith("; got 'worker'"), msg


def test_a_key_named_as_otp_names_it_points_at_ours_not_at_the_nearest_spelling() -> None:
    # OTP's child spec says `start` (and supervisor flags `max_restarts`/`max_seconds`): by spelling alone, `start`
    # was pointed at `restart`
    tree = ('[tree]\nid = "app"\nmax_restarts = 3\nmax_seconds = 5\n'
            '[[tree.children]]\nid = "w"\nstart = "myapp.store:Store"\n')
    found = dict(problems(tree))
    assert found["tree.children[0].start"] == ("unknown key 'start' (did you mean 'actor'? the worker's import "
                                               "path, \"module:Class\")")
    assert found["tree.max_restarts"] == "unknown key 'max_restarts' (did you mean 'intensity'?)"
    assert found["tree.max_seconds"] == "unknown key 'max_seconds' (did you mean 'period'?)"
