"""Which data dir a command without ``--data-dir`` uses (:func:`ouroactors.cli.common.resolve_data_dir`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ouroactors.cli.common import choices_hint, resolve_data_dir


def _data(directory: Path, *, served: bool = False) -> None:
    (directory / "lmdb").mkdir(parents=True)
    (directory / "lmdb" / "data.mdb").write_bytes(b"")
    if served:
        (directory / "system.json").write_text("{}")


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_default_serving_or_holding_data_with_nothing_served_below_is_itself(here):
    _data(here / ".ouroactors")
    _data(here / ".ouroactors" / "demo")  # a stopped one below: the default's own data first
    assert resolve_data_dir(".ouroactors") == ".ouroactors"
    _data(here / ".ouroactors" / "app", served=True)  # a served one below wins over stopped data (as before)
    assert resolve_data_dir(".ouroactors") == os.path.join(".ouroactors", "app")
    (here / ".ouroactors" / "system.json").write_text("{}")  # unless the default serves itself
    assert resolve_data_dir(".ouroactors") == ".ouroactors"


def test_the_one_served_system_below_wins_over_stopped_ones(here):
    _data(here / ".ouroactors" / "demo")  # a stopped demo's data
    _data(here / ".ouroactors" / "app", served=True)
    assert resolve_data_dir(".ouroactors") == os.path.join(".ouroactors", "app")
    _data(here / ".ouroactors" / "b", served=True)  # two served: not guessed, the error lists them
    assert resolve_data_dir(".ouroactors") == ".ouroactors"
    hint = choices_hint(".ouroactors")
    assert os.path.join(".ouroactors", "app") in hint and os.path.join(".ouroactors", "b") in hint
    assert "demo" not in hint  # the served ones are the choice while any serves


def test_with_none_served_the_one_data_dir_below_that_holds_data(here):
    (here / ".ouroactors" / "followers").mkdir(parents=True)  # no data: not a candidate
    assert resolve_data_dir(".ouroactors") == ".ouroactors" and choices_hint(".ouroactors") == ""
    _data(here / ".ouroactors" / "agent")
    assert resolve_data_dir(".ouroactors") == os.path.join(".ouroactors", "agent")
    _data(here / ".ouroactors" / "demo")
    assert resolve_data_dir(".ouroactors") == ".ouroactors"
    assert "agent" in choices_hint(".ouroactors") and "demo" in choices_hint(".ouroactors")


def test_a_data_dir_given_is_taken_as_given(here):
    _data(here / "elsewhere" / "app", served=True)
    assert resolve_data_dir("elsewhere") == "elsewhere" and choices_hint("elsewhere") == ""
    assert resolve_data_dir("./.ouroactors/") in ("./.ouroactors/", ".ouroactors")  # the default however spelt


def test_a_data_dir_planted_by_another_user_or_a_link_is_never_chosen(here):
    _data(here / ".ouroactors" / "planted")
    try:
        os.chown(here / ".ouroactors" / "planted", 65534, 65534)  # another local user's (needs root to plant here)
    except PermissionError:
        pytest.skip("planting another user's directory needs root")
    assert resolve_data_dir(".ouroactors") == ".ouroactors" and choices_hint(".ouroactors") == ""
    _data(here / "real")
    os.symlink(here / "real", here / ".ouroactors" / "link")  # a link below the default: not followed either
    assert resolve_data_dir(".ouroactors") == ".ouroactors"
    _data(here / ".ouroactors" / "mine", served=True)  # the user's own, beside both: found
    assert resolve_data_dir(".ouroactors") == os.path.join(".ouroactors", "mine")
