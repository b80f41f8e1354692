"""An approval shows the command that will run, whatever control characters the model put in it.

The attack: the model asks for ``shell`` with ``chmod -R 777 . <ESC>[2K<CR><RLO>olleh ohce``. Printed as it is on
the operator's terminal, ESC [2K erases the line, the carriage return goes back to its start and the right-to-left
override shows what follows reversed: the approval reads ``echo hello``, and the operator approves the ``chmod``. The
JSON of the arguments escaped ESC and CR already, but not U+202E; every string the CLI prints goes through
:mod:`ouroactors.cli.visible` now, so the terminal is given ``\\u202e`` to show, not to obey.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from .cli_helpers import Served, agent_tree, cli

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]

HIDDEN = "chmod -R 777 . \x1b[2K\r\u202eolleh ohce"
SCRIPT = {"name": "hidden rm", "turns": [
    {"events": [{"kind": "tool_call", "id": "c1", "name": "shell", "arguments": {"command": HIDDEN}}]},
    {"events": [{"kind": "text", "text": "done"}]},
]}


def test_an_approval_shows_the_control_characters_of_its_command(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    served = Served(tmp_path, agent_tree(tmp_path, workspace))
    try:
        created = cli("session", "new", "s1", "--sandbox", "none", "--script", str(script), "--workspace",
                      str(workspace), cwd=tmp_path)
        assert created.returncode == 0, created.stderr
        assert cli("session", "send", "s1", "clean up", cwd=tmp_path).returncode == 0
        followed = cli("session", "events", "s1", "--follow", "--until", "approval_needed", "--idle", "30",
                       cwd=tmp_path)
        assert followed.returncode == 0, followed.stderr
        deadline = time.monotonic() + 60
        while "state: waiting:approval" not in (shown := cli("session", "show", "s1", cwd=tmp_path).stdout):
            assert time.monotonic() < deadline, shown + cli("session", "events", "s1", cwd=tmp_path).stdout
            time.sleep(0.05)  # polling the durable state with a deadline: the CLI has no wait-for-state command
        listed = cli("approvals", "list", cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        for out in (followed.stdout, shown, listed.stdout):
            assert not {"\x1b", "\r", "\u202e"} & set(out), repr(out)
            assert "chmod -R 777 ." in out, out
        # JSON escapes the C0 controls (\u001b, \r); the console writes the direction override as its escape
        assert "\\u001b[2K\\r\\u202eolleh ohce" in shown, shown
        assert "\\u001b[2K\\r\\u202eolleh ohce" in listed.stdout.replace("\n", "")
    finally:
        served.stop(tmp_path / ".ouroactors")
