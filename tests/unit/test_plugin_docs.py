"""Every fixture the pytest plugin ships explains itself (``pytest --fixtures`` is where users look)."""

from __future__ import annotations

import subprocess
import sys

from tests.inner_pytest import UNRELATED_PLUGINS


def test_every_ouroactors_fixture_has_a_docstring(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "pytest", "--fixtures", "-p", "no:cacheprovider", *UNRELATED_PLUGINS,
                          str(tmp_path)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path).stdout
    lines = out.splitlines()
    undocumented = [lines[i] for i in range(len(lines) - 1)
                    if "ouroactors/" in lines[i] and "no docstring available" in lines[i + 1]]
    assert undocumented == []
    assert "actor_system_factory" in out and "tree_system" in out
