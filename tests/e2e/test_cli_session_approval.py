"""A user answers a session's approval from the CLI with what the CLI itself printed.

``session events`` names the call an approval is for (tool, arguments, call id), ``session show`` names the
approval and the command that answers it, and ``session approve`` takes either that approval id or the wait id
``show`` prints (``ask.vN.…``: the version and the call, so it cannot answer another call or an older ask).
"""

from __future__ import annotations

import json
import re
import signal
import stat
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
        broken = tmp_path / "broken.json"  # a call without its id: refused at creation, not by the first message
        broken.write_text(json.dumps({"turns": [{"events": [{"kind": "tool_call", "name": "shell"}]}]}))
        refused = cli("session", "new", "b1", "--script", str(broken), cwd=tmp_path)
        assert refused.returncode == 2 and "invalid scripted model file" in refused.stderr, refused.stderr
        assert "turns[0].events[0].id" in refused.stderr and cli("session", "show", "b1", cwd=tmp_path).returncode == 2
        typo = tmp_path / "typo.toml"
        typo.write_text('[model]\nkind = "opneai"\n')
        refused = cli("session", "new", "b2", "--config", str(typo), cwd=tmp_path)
        assert refused.returncode == 2 and "invalid session configuration" in refused.stderr, refused.stderr
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
        assert "`ouroactors session show a1` names the approval" in followed.stdout  # where to answer it

        shown = _shown(tmp_path, "a1", "waiting:approval")
        [approval_id] = re.findall(r"approval: (approval-[0-9a-f]+) write ", shown)
        assert f"answer: ouroactors session approve|deny a1 {approval_id}" in shown
        [wait_id] = re.findall(r"waits on: approval (ask\.v\d+\.[0-9a-f]{16})", shown)
        as_json = json.loads(cli("session", "show", "a1", "--json", cwd=tmp_path).stdout)  # the same, for a script
        assert [a["approval_id"] for a in as_json["approvals"]] == [approval_id] and as_json["unknown_outcomes"] == []
        assert as_json["state"] == "waiting:approval" and as_json["waits"][0].startswith(f"approval {wait_id}")
        listed = [json.loads(line) for line in cli("session", "list", "--json", cwd=tmp_path).stdout.splitlines()]
        assert [(v["session_id"], v["state"]) for v in listed] == [("a1", "waiting:approval")]
        steered = cli("session", "steer", "a1", "make it two lines", cwd=tmp_path)  # no runtime while it waits
        assert steered.returncode == 2 and "deny it with a reason to tell the model" in steered.stderr, steered.stderr

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
        # the approval's re-run, said once; the ask it repeated is not shown again
        assert settled.stdout.count("a new runtime goes on with the turn") == 1, settled.stdout
        assert settled.stdout.count("approval_needed") == 1, settled.stdout
        assert "names the approval" not in settled.stdout  # answered: no directions to answer it any more
        after = _shown(tmp_path, "a1", "suspended")
        assert "approval:" not in after  # nothing pending is named once the session moved on
        _check_export(tmp_path, approval_id)

        served.proc.send_signal(signal.SIGTERM)
        assert served.finish()[0] == 0
    finally:
        served.kill()


def _check_export(tmp_path: Path, approval_id: str) -> None:
    """``session export``: the whole durable history in one file, consistent with what the other commands show."""
    import base64

    exported = cli("session", "export", "a1", "-o", "a1.json", cwd=tmp_path)
    assert exported.returncode == 0 and "chain ok" in exported.stdout, exported.stderr
    doc = json.loads((tmp_path / "a1.json").read_text())
    assert doc["format"] == "ouroactors.session" and doc["unreadable"] == []
    session = doc["session"]
    assert session["state"] == "suspended" and session["principal"].startswith("user:")
    assert session["tenant"] and session["channels"] and session["pinned"]["workflow"]  # identifiers, versions
    assert doc["next_valid"] == ["message", "resume", "wait_timer", "wait_job", "cancel"]
    events = [json.loads(line) for line in cli("session", "events", "a1", "--json", cwd=tmp_path).stdout.splitlines()]
    assert [(e["cursor"], e["kind"]) for e in doc["events"]] == [(e["cursor"], e["kind"]) for e in events]
    [write] = [e for e in doc["effects"] if e["kind"] == "file_write"]
    assert write["status"] == "ok" and write["idempotency_key"]  # a completed tool result with its key
    assert f"approval {approval_id} approved by " in write["grant"]  # and who authorized it
    [approval] = doc["approvals"]
    assert approval["approval_id"] == approval_id and approval["status"] in ("approved", "consumed")
    kinds = [a["kind"] for a in doc["resume_events"]["accepted"]]
    assert kinds[0] == "message" and "approval" in kinds  # what resumed it, in order
    assert [a["path"] for a in doc["artifacts"]] == [str(tmp_path / "ws" / "out.txt")]
    archive = tmp_path / "a1.journal"
    archive.write_bytes(base64.b64decode(doc["journal"]["archive_b64"]))
    imported = cli("journal", "import", str(archive), "--data-dir", str(tmp_path / "audit"), cwd=tmp_path)
    assert imported.returncode == 0 and doc["journal"]["head_hash"] in imported.stdout, imported.stdout
    assert stat.S_IMODE((tmp_path / "audit").stat().st_mode) == 0o700  # private, as a system's data dir (was 0755)
    again = cli("session", "export", "a1", "-o", "a1.json", cwd=tmp_path)
    assert again.returncode == 2 and "exists already" in again.stderr
    # imported into the served data dir, the journal's id names no new session (it would continue that history)
    assert cli("journal", "import", str(archive), "--as", "evidence-1", cwd=tmp_path).returncode == 0
    taken = cli("session", "new", "evidence-1", cwd=tmp_path)
    assert taken.returncode == 2 and "has a journal here already" in taken.stderr, taken.stderr
    clash = cli("journal", "import", str(archive), "--as", "a1", cwd=tmp_path)  # a live session's id takes none
    assert clash.returncode == 2 and "'a1' already has a journal here" in clash.stderr, clash.stderr
