"""ouroactors as a wheel installs it: the package alone, no source checkout around it.

``pip install ouroactors`` (or ``pip install .``) puts only the ``ouroactors`` package and its package data in
site-packages. Everything the CLI and the demo read must be inside it: a file reached through the checkout (as the
agent tree once was, ``supervision_trees/agent.toml`` beside the package) works in every test run from the
repository and fails for every user who installed a wheel.
"""

from __future__ import annotations

import configparser
import fnmatch
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "ouroactors"


def _package_data() -> dict[str, list[str]]:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    return {package.strip(): value.split() for package, value in cfg["options.package_data"].items()}


def test_every_data_file_of_the_package_is_declared_package_data() -> None:
    data = _package_data()
    undeclared = []
    for path in PACKAGE.rglob("*"):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".py":
            continue
        owner = path.parent.relative_to(REPO).as_posix().replace("/", ".")
        if not any(fnmatch.fnmatch(path.name, pattern) for pattern in data.get(owner, ())):
            undeclared.append(path.relative_to(REPO).as_posix())
    assert undeclared == [], f"not in setup.cfg [options.package_data], so not in a wheel: {undeclared}"
    assert (PACKAGE / "trees" / "agent.toml").is_file() and (PACKAGE / "trees" / "example.toml").is_file()


def test_the_checkout_paths_of_the_shipped_trees_are_the_shipped_files() -> None:
    for name in ("agent", "example"):  # documented commands use these paths: one file each, not two copies
        assert (REPO / "supervision_trees" / f"{name}.toml").resolve() == (PACKAGE / "trees" / f"{name}.toml")


@pytest.fixture
def installed(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The package alone in a site dir, as a wheel lays it out, and an environment that imports it from there."""
    site = tmp_path / "site"
    patterns = [pattern for patterns in _package_data().values() for pattern in patterns]
    shutil.copytree(PACKAGE, site / "ouroactors", ignore=lambda _dir, names: [
        n for n in names if n == "__pycache__" or (not n.endswith(".py") and "." in n
                                                   and not any(fnmatch.fnmatch(n, p) for p in patterns))])
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "120"}
    return site, env


def _cli(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ouroactors.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_an_installed_package_checks_the_shipped_trees_by_name(installed: tuple[Path, dict[str, str]],
                                                                 tmp_path: Path) -> None:
    site, env = installed
    cwd = tmp_path / "project"
    cwd.mkdir()
    where = subprocess.run([sys.executable, "-c", "import ouroactors; print(ouroactors.__file__)"], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=60)
    assert where.stdout.strip() == str(site / "ouroactors" / "__init__.py")  # the copy, not the checkout
    for name, root in (("agent", "agent"), ("example", "example")):
        done = _cli(env, cwd, "check", name)
        assert done.returncode == 0, done.stderr
        assert f"ok — root '{root}'" in done.stdout
    missing = _cli(env, cwd, "check", "agnet")
    assert missing.returncode == 2
    assert "cannot read tree file: No such file or directory; the shipped trees are named agent and example" \
        in missing.stdout + missing.stderr


def test_a_file_of_the_same_name_wins_over_a_shipped_tree(installed: tuple[Path, dict[str, str]],
                                                          tmp_path: Path) -> None:
    _site, env = installed
    cwd = tmp_path / "project"
    cwd.mkdir()
    (cwd / "agent").write_text('[tree]\nid = "mine"\nstrategy = "one_for_one"\nchildren = []\n')
    done = _cli(env, cwd, "check", "agent")
    assert done.returncode == 0, done.stderr
    assert "root 'mine'" in done.stdout


def test_the_demo_tree_loads_from_an_installed_package(installed: tuple[Path, dict[str, str]],
                                                       tmp_path: Path) -> None:
    site, env = installed
    probe = ("from pathlib import Path\n"
             "from ouroactors.runtime.demo_setup import AGENT_TOML, agent_tree\n"
             "tree = agent_tree(Path('ws').resolve())\n"
             "print(AGENT_TOML)\n"
             "print([child.id for child in tree.children])\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == str(site / "ouroactors" / "trees" / "agent.toml")
    assert "'storage', 'ledger', 'grants', 'workspace'" in done.stdout.splitlines()[1]
