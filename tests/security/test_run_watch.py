"""Issue 11 §4: a foreground ``ouroactors run`` whose admin is SIGKILLed says so and fails."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from ..e2e.cli_helpers import SIMPLE_TREE, Served, cli, write_tree
from .frames_support import group_pids

pytestmark = pytest.mark.multiproc


@pytest.mark.slow
def test_run_notices_its_admin_being_killed_and_exits_with_the_reason(tmp_path):
    tree = write_tree(tmp_path / "t.toml", SIMPLE_TREE)
    data = tmp_path / "data"
    served = Served(tmp_path, str(tree), "--data-dir", str(data))
    try:
        found = json.loads((data / "system.json").read_text())
        admin, pgid = found["admin_pid"], found["admin_pgid"]
        started = time.monotonic()
        os.kill(admin, signal.SIGKILL)
        code, out = served.finish(timeout=30)
        assert time.monotonic() - started < 15
        assert code == 6, out
        assert f"admin process (pid {admin}) died" in " ".join(out.split())
        assert "stopped cleanly" not in out
        assert group_pids(pgid) == []  # nothing of the system survives its admin
        assert cli("status", "--data-dir", str(data), cwd=tmp_path).returncode != 0
    finally:
        served.kill()
