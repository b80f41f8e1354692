"""A workspace on disk for the grants tests: path rules judge the real (resolved) path, so the
layouts the attacks need — symlinks out, loops, an alias of .git, a data dir — must exist."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def build_layout(base: Path) -> dict[str, str]:
    """``base/ws`` is the workspace root (a git-like tree with a bare repository ``bare.git``),
    ``base/outside`` lies beside it and
    ``base/data`` is the protected data dir. Returns the placeholders the corpus uses."""
    ws, outside, data = base / "ws", base / "outside", base / "data"
    for d in (ws / "src" / "a", ws / ".git" / "hooks", ws / "sub" / ".git", outside, data, ws / "secrets",
              ws / "bare.git" / "objects", ws / "bare.git" / "refs"):
        d.mkdir(parents=True, exist_ok=True)
    for f in (ws / "src" / "app.py", ws / ".git" / "config", ws / ".git" / "HEAD", outside / "x",
              data / "ledger.mdb", ws / "notes.md", ws / "bare.git" / "HEAD"):
        f.write_text("x\n")
    links = {"link_out": "../outside", "loop_a": "loop_b", "loop_b": "loop_a", "g": ".git",
             "data_link": "../data", "dangling": "../outside/newfile", "abs_out": str(outside),
             "etc_link": "/etc", "proc_link": "/proc/self/cwd", "src_link": "src"}
    for name, target in links.items():
        os.symlink(target, ws / name)
    return {"{ws}": str(ws), "{out}": str(outside), "{data}": str(data), "{base}": str(base),
            "{WS}": str(ws).upper()}


@pytest.fixture(scope="session")
def layout(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build_layout(tmp_path_factory.mktemp("grants-layout"))


@pytest.fixture(scope="session")
def ws(layout: dict[str, str]) -> str:
    return layout["{ws}"]
