"""An operator answers an approval from the CLI, seeing the exact call (issue 12 §4).

The operator is shown the canonical arguments of the call — not a tool name and 12 hex digits —
and answers as the identity whose credentials are in the data dir; a name typed on the command
line settles nothing.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from ouroactors import ActorSystem
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.grants.actor import ListApprovals, RequestApproval
from ouroactors.authorities.grants.operators import read_credentials

from .cli_helpers import Served, cli

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


def test_the_operator_sees_the_canonical_arguments_and_answers_as_itself(tmp_path):
    served = Served(tmp_path, str(REPO / "supervision_trees" / "agent.toml"))
    data = tmp_path / ".ouroactors"
    try:
        client = ActorSystem.connect(data)
        arguments = {"command": "git push --force origin main", "cwd": "/srv/repo", "note": "- [x] done"}
        approval = ask_authority(client, "agent/grants", RequestApproval("session-1", "Bash", arguments, 7))

        listed = cli("approvals", "list", cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        assert "git push --force origin main" in listed.stdout
        assert "[x] done" in listed.stdout  # text, never read as rich markup
        [as_json] = [json.loads(line) for line in cli("approvals", "list", "--json", cwd=tmp_path).stdout.splitlines()]
        assert as_json["approval_id"] == approval.approval_id and as_json["arguments"] == arguments
        shown = json.loads(cli("approvals", "show", approval.approval_id, cwd=tmp_path).stdout)
        assert shown["arguments"] == arguments and shown["call_digest"] == approval.call_digest
        operator, _ = read_credentials(data)
        assert shown["answerers"] == [operator]  # the authority's policy, not the requester's

        answered = cli("approvals", "approve", approval.approval_id, "--reason", "reviewed", cwd=tmp_path)
        assert answered.returncode == 0, answered.stderr
        assert "git push --force origin main" in answered.stdout  # shown before it is answered
        [done] = ask_authority(client, "agent/grants", ListApprovals())
        assert done.status == "approved" and done.answered_by == operator
        served.proc.send_signal(signal.SIGTERM)
        assert served.finish()[0] == 0
    finally:
        served.kill()
