"""A user's own actors import from their project without installing it or setting PYTHONPATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .cli_helpers import Served, cli

STORE = """
from ouroactors import Worker


class Store(Worker):
    def on_message(self, message, sender):
        return ("stored", message)
"""

TREE = """
[tree]
id = "app"
strategy = "one_for_one"

[[tree.children]]
id = "store"
actor = "myapp.store:Store"
"""


def _project(root: Path) -> Path:
    (root / "myapp").mkdir(parents=True)
    (root / "myapp" / "__init__.py").write_text("")
    (root / "myapp" / "store.py").write_text(STORE)
    (root / "pyproject.toml").write_text("[project]\nname = 'myapp'\nversion = '0'\n")
    (root / "trees").mkdir()
    tree = root / "trees" / "app.toml"
    tree.write_text(TREE)
    return tree


def test_check_and_run_find_the_project_of_the_tree_file(tmp_path):
    tree = _project(tmp_path / "proj")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert "myapp" not in os.environ.get("PYTHONPATH", "")
    checked = cli("check", str(tree), cwd=elsewhere)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    data_dir = tmp_path / "data"
    served = Served(elsewhere, str(tree), "--data-dir", str(data_dir))
    try:
        code = ("import sys; from ouroactors import ActorSystem; "
                f"s = ActorSystem.connect({str(data_dir)!r}); print(s.ask('app/store', 'hi'))")
        answer = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                                cwd=tmp_path / "proj")
        assert "stored" in answer.stdout, answer.stdout + answer.stderr
    finally:
        served.stop(data_dir)


TYPED_STORE = """
from dataclasses import dataclass

from ouroactors import Worker


@dataclass
class Item:
    key: str
    value: int


class Store(Worker):
    def on_message(self, message, sender):
        return Item(message, 1)
"""


def test_an_answer_of_the_projects_own_type_is_decoded_in_the_project_and_named_elsewhere(tmp_path):
    """``ouroactors ask`` is a console script: its path has the script's directory, not the current one. Before, an
    answer of the project's own type did not unpickle in it, thespian dropped the frame, and the ask waited its whole
    timeout for "no answer" — from the project's directory too."""
    tree = _project(tmp_path / "proj")
    (tmp_path / "proj" / "myapp" / "store.py").write_text(TYPED_STORE)
    script = Path(sys.executable).parent / "ouroactors"  # the installed console script, as a user runs it
    assert script.is_file(), f"no console script beside {sys.executable}"
    data_dir = tmp_path / "data"
    served = Served(tmp_path, str(tree), "--data-dir", str(data_dir))
    try:
        def ask(cwd: Path) -> subprocess.CompletedProcess[str]:
            return subprocess.run([str(script), "ask", "--data-dir", str(data_dir), "--timeout", "30", "app/store",
                                   '"k"'], cwd=cwd, capture_output=True, text=True, timeout=120,
                                  env={**os.environ, "COLUMNS": "200"})

        here = ask(tmp_path / "proj")
        assert here.returncode == 0 and here.stdout.strip() == "Item(key='k', value=1)", here.stdout + here.stderr
        elsewhere = ask(tmp_path)
        assert elsewhere.returncode == 2
        assert ("UnsendableAnswer: app/store handled the request, but its answer (myapp.store.Item) cannot be sent "
                "between processes: this process cannot import what it names: myapp.store.Item "
                "(ModuleNotFoundError: No module named 'myapp')") in elsewhere.stderr, elsewhere.stderr
    finally:
        served.stop(data_dir)
