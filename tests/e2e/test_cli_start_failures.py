"""What a failed start says: the reason the child never started, and a traceback hint only where there is one.

Before: a child placed by ``requires`` on a system where no node offers it failed with "killed(exited before
reporting its start)" (admin.out: thespian's "Pending Actor create … failed (3586)", naming nothing), and a child
whose on_start called os._exit pointed at "the actor's full traceback" in an admin.out that had none.
"""

from __future__ import annotations

import pytest

from ouroactors.system.marker import read_marker

from .cli_helpers import cli

pytestmark = pytest.mark.multiproc

WORKERS = """
import os
from ouroactors import Worker


class Fine(Worker):
    pass


class Exits(Worker):
    def on_start(self):
        os._exit(7)


class Raises(Worker):
    def on_start(self):
        raise ValueError("no config")
"""


def _tree(child: str, extra: str = "") -> str:
    return f'[tree]\nid = "t"\n\n[[tree.children]]\nid = "c"\nactor = "startfail.w:{child}"\n{extra}'


@pytest.fixture
def project(tmp_path):
    (tmp_path / "startfail").mkdir()
    (tmp_path / "startfail" / "__init__.py").write_text("")
    (tmp_path / "startfail" / "w.py").write_text(WORKERS)
    return tmp_path


def _run(project, name: str, body: str):
    (project / f"{name}.toml").write_text(body)
    data = project / name
    done = cli("run", f"{name}.toml", "--detach", "--data-dir", str(data), cwd=project, timeout=120)
    assert read_marker(data) is None  # the failed start shut its system down
    return done.returncode, " ".join(done.stderr.split())


def test_a_placement_no_node_offers_names_the_requirement(project):
    code, said = _run(project, "req", _tree("Fine", 'requires = { gpu = "yes" }\n'))
    assert code == 3, said
    assert "no node of the system created it for requires = {gpu = 'yes'}" in said, said
    assert "full traceback" not in said


def test_an_exit_in_on_start_points_at_no_traceback(project):
    code, said = _run(project, "exits", _tree("Exits"))
    assert code == 3, said
    assert "exited before reporting its start" in said and "full traceback" not in said, said


def test_a_raise_in_on_start_still_points_at_its_traceback(project):
    code, said = _run(project, "raises", _tree("Raises"))
    assert code == 3, said
    assert "ValueError: no config" in said and "the actor's full traceback is in" in said, said
