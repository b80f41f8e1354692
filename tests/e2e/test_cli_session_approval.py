"""A user answers a session's approval from the CLI with what the CLI itself printed.

``session events`` names the call an approval is for (tool, arguments, call id), ``session show`` names the
approval and the command that answers it, and ``session approve`` takes either that approval id or the wait id
``show`` prints (``ask.vN.…``: the version and the call, so it cannot answer another call or an older ask).
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest

from .cli_helpers import Served, cli

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.multiproc, pytest.mark.slow]

SCRIPT = {"name": "one write", "turns": [
    {"events": [{"kind": "tool_call", "id": "w1", "name": "write",
                 "arguments": {"path": "out.txt", "content": "hi\n"}}]},
    {"events": [{"kind": "text", "text": "written"}]},
]}


def _shown(tmp_path: Path, sid: str, state: str) -> str:
    deadline = time.monotonic() + 60
    while True:
        shown = cli("session", "show", sid, cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        if re.search(rf"state: {re.escape(state)}\n", shown.stdout):
            return shown.stdout
        assert time.monotonic() < deadline, f"session {sid} never reached {state}:\n{shown.stdout}"
        time.sleep(0.05)  # polling the durable state with a deadline: the CLI has no wait-for-state command


def test_the_cli_names_the_approval_and_answers_it_by_the_wait_id(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    tree = (REPO / "supervision_trees" / "agent.toml").read_text()
    assert "allowed_roots = []" in tree
    (tmp_path / "agent.toml").write_text(tree.replace("allowed_roots = []", f"allowed_roots = [{str(workspace)!r}]"))
    served = Served(tmp_path, str(tmp_path / "agent.toml"))
    try:
        created = cli("session", "new", "a1", "--sandbox", "none", "--script", str(script), "--workspace",
                      str(workspace), cwd=tmp_path)
        assert created.returncode == 0, created.stderr
        assert cli("session", "send", "a1", "write it", cwd=tmp_path).returncode == 0

        followed = cli("session", "events", "a1", "--follow", "--until", "approval_needed", "--idle", "30",
                       cwd=tmp_path)
        assert followed.returncode == 0, followed.stderr
        lines = followed.stdout.splitlines()
        assert re.fullmatch(r"\s+1 turn_started\s+'write it'", lines[0]), lines
        assert 'tool_call        write {"content": "hi\\n", "path": "out.txt"} (w1)' in followed.stdout
        assert re.search(r"approval_needed  write \{.*\"path\": \"out.txt\"\} \(w1\): no rule", followed.stdout)
        assert "_judged_against" not in followed.stdout  # what the approval was judged against: `approvals show`

        shown = _shown(tmp_path, "a1", "waiting:approval")
        [approval_id] = re.findall(r"approval: (approval-[0-9a-f]+) write ", shown)
        assert f"answer: ouroactors session approve|deny a1 {approval_id}" in shown
        [wait_id] = re.findall(r"waits on: approval (ask\.v\d+\.[0-9a-f]{16})", shown)

        older = re.sub(r"ask\.v(\d+)\.", lambda m: f"ask.v{int(m.group(1)) - 1}.", wait_id)
        refused = cli("session", "approve", "a1", older, cwd=tmp_path)  # the same call at another version: none
        assert refused.returncode == 2 and f"has no approval {older!r}" in refused.stderr, refused.stderr
        assert not (workspace / "out.txt").exists()

        answered = cli("session", "approve", "a1", wait_id, cwd=tmp_path)
        assert answered.returncode == 0, answered.stderr
        assert answered.stdout.startswith(f"{approval_id}: approved by "), answered.stdout  # the id it resolved to
        settled = cli("session", "events", "a1", "--follow", "--until", "turn_settled", "--idle", "30",
                      cwd=tmp_path)
        assert settled.returncode == 0 and "turn_settled     completed" in settled.stdout, settled.stdout
        assert "tool_result      ok (w1)" in settled.stdout
        after = _shown(tmp_path, "a1", "suspended")
        assert "approval:" not in after  # nothing pending is named once the session moved on

        served.proc.send_signal(signal.SIGTERM)
        assert served.finish()[0] == 0
    finally:
        served.kill()
