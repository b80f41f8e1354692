"""The command line's side of authenticated frames: joining a convention names the shared secret."""

from __future__ import annotations

import socket

import pytest

from ..e2e.cli_helpers import SIMPLE_TREE, cli, write_tree

pytestmark = pytest.mark.multiproc


def test_join_without_a_secret_file_is_a_clear_error(tmp_path):
    tree = write_tree(tmp_path / "t.toml", SIMPLE_TREE)
    with socket.socket() as leader:  # something answers there; the secret is what is missing
        leader.bind(("127.0.0.1", 0))
        leader.listen()
        port = leader.getsockname()[1]
        result = cli("run", str(tree), "--join", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "d"),
                     cwd=tmp_path, timeout=30)
    assert result.returncode == 2
    text = " ".join(result.stderr.split())
    assert "needs the leader's secret" in text and "--secret-file" in text


def test_a_world_readable_secret_file_is_refused(tmp_path):
    tree = write_tree(tmp_path / "t.toml", SIMPLE_TREE)
    secret = tmp_path / "leader-secret"
    secret.write_text("ab" * 32)
    secret.chmod(0o644)
    with socket.socket() as leader:
        leader.bind(("127.0.0.1", 0))
        leader.listen()
        port = leader.getsockname()[1]
        result = cli("run", str(tree), "--join", f"127.0.0.1:{port}", "--secret-file", str(secret),
                     "--data-dir", str(tmp_path / "d"), cwd=tmp_path, timeout=30)
    assert result.returncode == 2
    assert "chmod 600" in " ".join(result.stderr.split())


@pytest.mark.slow
def test_two_nodes_on_the_command_line_share_the_leaders_secret(tmp_path):
    from ouroactors.system.handle import free_port

    from ..actor.helpers import wait_until
    from ..e2e.cli_helpers import Served, events

    tree = write_tree(tmp_path / "t.toml", SIMPLE_TREE)
    port = free_port()
    leader = Served(tmp_path, str(tree), "--leader", "--admin-port", str(port), "--data-dir", str(tmp_path / "l"))
    member = None
    try:
        copy = tmp_path / "copy-of-leader-secret"
        copy.write_bytes((tmp_path / "l" / "secret").read_bytes())
        copy.chmod(0o600)
        member = Served(tmp_path, str(tree), "--join", f"127.0.0.1:{port}", "--secret-file", str(copy),
                        "--data-dir", str(tmp_path / "m"))
        # The member's run is serving: it saw the leader. The leader saw the member too.
        wait_until(lambda: any(e["kind"] == "node_joined" for e in events(tmp_path / "l")), timeout=20,
                   what="the leader to see the member join")
        assert (tmp_path / "m" / "secret").read_bytes() == copy.read_bytes()  # kept for `status`, `stop`
    finally:
        for served in (member, leader):
            if served is not None:
                served.proc.send_signal(2)
                served.finish(timeout=60)
                served.kill()
