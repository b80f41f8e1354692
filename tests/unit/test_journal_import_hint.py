"""``journal import`` prints the commands that check what it imported: copied into a shell, they must name the same
data dir and session however they are spelt (a space in the path split ``--data-dir`` in two)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from ouroactors.authorities.storage.env import StorageConfig, close_env, open_env
from ouroactors.runtime.execution.journal import Journal

CLI = [sys.executable, "-c", "from ouroactors.cli import main; main()"]


def test_the_next_commands_quote_the_data_dir(tmp_path: Path) -> None:
    source = tmp_path / "src"
    config = StorageConfig.under(source)
    journal = Journal(open_env(config), "s1")
    journal.stage("session_opened", {"version": 1}, at=1)
    journal.stage("prompt", {"text": "hello"}, turn=0, at=2)
    assert journal.flush().committed
    close_env(config)
    archive = tmp_path / "s1.journal"
    exported = subprocess.run([*CLI, "journal", "export", "s1", "-o", str(archive), "--data-dir", str(source)],
                              capture_output=True, text=True, timeout=60)
    assert exported.returncode == 0, exported.stderr
    target = tmp_path / "my data; rm -rf x"
    imported = subprocess.run([*CLI, "journal", "import", str(archive), "--data-dir", str(target)],
                              capture_output=True, text=True, timeout=60)
    assert imported.returncode == 0, imported.stderr
    hint = imported.stdout.replace("\n", " ").split("next: ", 1)[1]
    first = shlex.split(hint.split("; ouroactors journal replay")[0])
    assert first == ["ouroactors", "journal", "verify", "s1", "--data-dir", str(target)], hint
    assert f"--data-dir {shlex.quote(str(target))}" in hint
