"""Every command finds a tree's own data dir below the default, as `status` and `session send` do.

The README's layout names a data dir below ``.ouroactors`` in the tree file (``[system] data_dir =
".ouroactors/agent"``) and a second terminal in the same directory gives no ``--data-dir``. The commands that ask the
system found it; those that read the data dir's files themselves did not: ``session events`` opened (and created) an
empty environment at ``.ouroactors/lmdb`` and answered "no session", ``session approve`` found no operator
credentials, ``journal verify`` and ``session export`` found "no ouroactors data here". With the system stopped, the
one data dir below still answers the commands that read files.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from .cli_helpers import Served, agent_tree, cli

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]

SCRIPT = {"name": "one write", "turns": [
    {"events": [{"kind": "tool_call", "id": "w1", "name": "write",
                 "arguments": {"path": "out.txt", "content": "hi\n"}}]},
    {"events": [{"kind": "text", "text": "written"}]},
]}


def _approval_id(tmp_path: Path, sid: str) -> str:
    deadline = time.monotonic() + 60
    while True:
        shown = cli("session", "show", sid, cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        found = re.findall(r"approval: (approval-[0-9a-f]+) write ", shown.stdout)
        if "state: waiting:approval" in shown.stdout and found:
            return found[0]
        assert time.monotonic() < deadline, shown.stdout
        time.sleep(0.05)  # polling the durable state with a deadline: the CLI has no wait-for-state command


def test_file_reading_commands_find_the_data_dir_below_the_default(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    tree_file = tmp_path / agent_tree(tmp_path, workspace)
    tree_file.write_text(tree_file.read_text().replace('base = "multiproc"',
                                                       'base = "multiproc"\ndata_dir = ".ouroactors/agent"', 1))
    data = tmp_path / ".ouroactors" / "agent"
    served = Served(tmp_path, str(tree_file))
    try:
        assert cli("session", "new", "s1", "--sandbox", "none", "--script", "script.json", "--workspace",
                   str(workspace), cwd=tmp_path).returncode == 0
        assert cli("session", "send", "s1", "write it", cwd=tmp_path).returncode == 0
        followed = cli("session", "events", "s1", "--follow", "--until", "approval_needed", "--idle", "30",
                       cwd=tmp_path)  # reads the committed log itself, in this process
        assert followed.returncode == 0 and "approval_needed" in followed.stdout, followed.stdout + followed.stderr
        approved = cli("session", "approve", "s1", _approval_id(tmp_path, "s1"), cwd=tmp_path)  # the credentials
        assert approved.returncode == 0 and "approved by" in approved.stdout, approved.stdout + approved.stderr
        settled = cli("session", "events", "s1", "--follow", "--until", "turn_settled", "--idle", "30", cwd=tmp_path)
        assert settled.returncode == 0 and "turn_settled" in settled.stdout, settled.stdout + settled.stderr
        verified = cli("journal", "verify", "s1", cwd=tmp_path)
        assert verified.returncode == 0 and "chain ok" in verified.stdout, verified.stdout + verified.stderr
        exported = cli("session", "export", "s1", "-o", "s1.json", cwd=tmp_path)
        assert exported.returncode == 0, exported.stderr
        assert json.loads((tmp_path / "s1.json").read_text())["session"]["session_id"] == "s1"
    finally:
        served.stop(data, found_from_cwd=True)
    assert not (tmp_path / ".ouroactors" / "lmdb").exists()  # nothing made where no system is
    down = cli("journal", "verify", "s1", cwd=tmp_path)  # stopped: the one data dir below that holds data
    assert down.returncode == 0 and "chain ok" in down.stdout, down.stdout + down.stderr
    (tmp_path / ".ouroactors" / "other" / "lmdb").mkdir(parents=True)  # a second one: which is not guessed
    (tmp_path / ".ouroactors" / "other" / "lmdb" / "data.mdb").write_bytes(b"")
    both = cli("journal", "verify", "s1", cwd=tmp_path)
    assert both.returncode == 2, both.stdout + both.stderr
    text = " ".join(both.stderr.split())
    assert ".ouroactors/agent" in text and ".ouroactors/other" in text and "--data-dir" in text, text
