"""What ``faults arm`` imports to learn a plan's declared points: the running actors' modules, from the directory it
runs in — never a module another user could plant there, and never one that shadows an installed module.

Real files and real imports (each test a fresh module name, forgotten afterwards)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ouroactors.cli.faults import _import_actor_modules
from ouroactors.core import faults


def _plant(where: Path, package: str, point: str) -> None:
    (where / package).mkdir()
    (where / package / "__init__.py").write_text("")
    (where / package / "store.py").write_text(
        f"from ouroactors.core import faults\nfaults.register_point({point!r}, 'planted')\n")


@pytest.fixture
def clean_imports(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]
    faults._KNOWN_POINTS.pop("mine.after_store", None)
    faults._KNOWN_POINTS.pop("planted.after_store", None)


def test_the_actors_modules_of_ones_own_directory_declare_their_points(tmp_path: Path, clean_imports: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _plant(tmp_path, "mineapp", "mine.after_store")
    tmp_path.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    _import_actor_modules(["mineapp.store:Store", None])
    assert "mine.after_store" in faults.known_points()
    assert str(tmp_path) not in sys.path  # only for the imports


def test_a_directory_others_may_write_is_not_imported_from(tmp_path: Path, clean_imports: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    _plant(shared, "plantedapp", "planted.after_store")
    shared.chmod(0o1777)  # like /tmp: anyone may put a module here
    monkeypatch.chdir(shared)
    _import_actor_modules(["plantedapp.store:Store"])
    assert "planted.after_store" not in faults.known_points() and "plantedapp" not in sys.modules


def test_a_module_here_never_shadows_an_installed_one(tmp_path: Path, clean_imports: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tomllib.py").write_text("raise SystemExit('shadowed')\n")  # the stdlib's name
    tmp_path.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("tomllib", None)
    _import_actor_modules(["tomllib:X"])
    import tomllib

    assert os.path.dirname(tomllib.__file__) != str(tmp_path)
