"""Read a session's journal from another process: shared by the execution and coordinator actor tests.

Why another process: those tests start actor systems, whose processes are forked from this one, and an LMDB
environment must be used only in the process that opened it, never across a fork (see the shared notes on LMDB).
So the journal is read by ``python -c`` and the answer comes back as JSON on its stdout.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class JournalRead:
    kinds: list[str]  # every record's kind, in journal order
    verdict: str | None  # "ok" or why the chain does not verify; None when not asked to verify


def read_journal(data_dir: Any, session: str, *, verify: bool = False) -> JournalRead:
    """The journal of ``session`` under ``data_dir``: its record kinds and, with ``verify``, the chain's verdict."""
    code = ("import json; from ouroactors.authorities.storage.env import StorageConfig, open_env; "
            "from ouroactors.runtime.execution.reading import records, verify; "
            f"env = open_env(StorageConfig.under({str(data_dir)!r})); "
            f"v = verify(env, {session!r}) if {verify!r} else None; "
            f"kinds = [r.kind for r in records(env, {session!r})]; "
            "print(json.dumps({'kinds': kinds, 'verdict': None if v is None else ('ok' if v.ok else v.reason)}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    return JournalRead(found["kinds"], found["verdict"])


def journal_kinds(data_dir: Any, session: str) -> list[str]:
    """The journal's record kinds."""
    return read_journal(data_dir, session).kinds


def journal_verdict(data_dir: Any, session: str) -> list[str]:
    """``[verdict, last record's kind]``: "ok" when the chain verifies, else the reason."""
    read = read_journal(data_dir, session, verify=True)
    return [read.verdict or "", read.kinds[-1]]


def replay_cli(data_dir: Any, session: str) -> tuple[int, str]:
    """``ouroactors journal replay SESSION`` on ``data_dir``, in another process: its exit code and output."""
    code = "import sys; from ouroactors.cli import main; sys.exit(main())"
    out = subprocess.run([sys.executable, "-c", code, "journal", "replay", session, "--data-dir", str(data_dir)],
                         capture_output=True, text=True, timeout=120)
    return out.returncode, out.stdout + out.stderr

