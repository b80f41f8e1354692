"""A user's view of sessions on the served agent tree: new, send, follow the committed events, resume --after."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from .cli_helpers import Served, cli

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


def lines(result) -> list[dict]:
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_session_new_send_events_and_resume_after_a_cursor(tmp_path):
    served = Served(tmp_path, str(REPO / "supervision_trees" / "agent.toml"))
    try:
        created = cli("session", "new", "s1", "--sandbox", "none", cwd=tmp_path)
        assert created.returncode == 0, created.stderr
        assert created.stdout.strip() == "s1"
        sent = cli("session", "send", "s1", "-", "--event-id", "msg-0001", cwd=tmp_path, input="tidy the notes\n")
        assert sent.returncode == 0, sent.stderr  # TEXT '-': standard input, its line end not part of the text

        followed = lines(cli("session", "events", "s1", "--follow", "--until", "turn_settled", "--idle", "30",
                             "--json", cwd=tmp_path))
        assert [e["cursor"] for e in followed] == list(range(1, len(followed) + 1))
        assert followed[0]["kind"] == "turn_started" and followed[-1]["kind"] == "turn_settled"
        assert followed[0]["data"]["prompt"] == "tidy the notes"

        tail = lines(cli("session", "events", "s1", "--after", "3", "--json", cwd=tmp_path))
        assert tail == followed[3:]  # from any cursor: the same events, no gap, no duplicate

        shown = cli("session", "show", "s1", cwd=tmp_path)
        assert shown.returncode == 0 and "suspended" in shown.stdout, shown.stdout
        assert "next valid: message, resume, wait_timer, wait_job, cancel" in shown.stdout, shown.stdout
        artifacts = cli("session", "artifacts", "s1", "--json", cwd=tmp_path)
        assert artifacts.returncode == 0 and all(json.loads(line)["artifact_id"].startswith(("sha256:", "deleted"))
                                                 for line in artifacts.stdout.splitlines()), artifacts.stderr
        unknown = cli("session", "artifacts", "nope", cwd=tmp_path)
        assert unknown.returncode != 0 and "nope" in unknown.stderr, unknown.stderr
        retried = cli("session", "send", "s1", "tidy the notes", "--event-id", "msg-0001", cwd=tmp_path)
        assert retried.returncode == 2 and "duplicate" in retried.stderr, retried.stderr  # no second turn
        assert "suspended" in cli("session", "show", "s1", cwd=tmp_path).stdout
        stale = cli("session", "send", "s1", "again", "--expected-version", "0", cwd=tmp_path)
        assert stale.returncode == 2 and "stale" in stale.stderr, stale.stderr
        assert "rejected events: 2" in cli("session", "show", "s1", cwd=tmp_path).stdout
        token = cli("session", "add-principal", "user:bob", cwd=tmp_path).stdout.strip()
        assert len(token) >= 32
        as_bob = {"OUROACTORS_PRINCIPAL": "user:bob", "OUROACTORS_PRINCIPAL_TOKEN": token}
        bob = cli("session", "send", "s1", "mine now", cwd=tmp_path, env=as_bob)
        assert bob.returncode == 2 and "authority" in bob.stderr, bob.stderr  # verified, but not the owner
        claimed = cli("session", "send", "s1", "mine now", cwd=tmp_path, env={"OUROACTORS_PRINCIPAL": "user:bob"})
        assert claimed.returncode == 2 and "identity" in claimed.stderr, claimed.stderr  # a name alone
        assert "rejected events: 4" in cli("session", "show", "s1", cwd=tmp_path).stdout
        listed = cli("session", "list", cwd=tmp_path)
        assert listed.returncode == 0 and "s1" in listed.stdout
        assert "s1" not in cli("session", "list", "--all", cwd=tmp_path, env=as_bob).stdout  # reads are bob's own
        hidden = cli("session", "show", "s1", cwd=tmp_path, env=as_bob)
        assert hidden.returncode == 2 and "s1" in hidden.stderr and "unknown" in hidden.stderr.lower(), hidden.stderr

        cancelled = cli("session", "cancel", "s1", cwd=tmp_path)
        assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout, cancelled.stderr
        assert cli("session", "list", cwd=tmp_path).stdout.strip() == "no live sessions (--all lists ended ones too)"
        assert "s1" in cli("session", "list", "--all", cwd=tmp_path).stdout
        retried = cli("session", "cancel", "s1", cwd=tmp_path)  # done already: a retry is not an error
        assert retried.returncode == 0 and "cancelled already" in retried.stdout, retried.stderr
        followed = cli("session", "events", "s1", "--follow", cwd=tmp_path)  # ends, and says why
        assert re.search(r"\nsession s1 is cancelled \(cancelled by user:[^)]+\): its log ends here$",
                         followed.stdout.rstrip()), followed.stdout
        again = cli("session", "send", "s1", "more", cwd=tmp_path)
        assert again.returncode == 2 and "cancelled" in again.stderr

        served.proc.send_signal(signal.SIGTERM)
        assert served.finish()[0] == 0
    finally:
        served.kill()
