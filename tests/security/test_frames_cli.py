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
