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
