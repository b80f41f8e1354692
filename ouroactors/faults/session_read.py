"""Read what a session left in LMDB — record, event log, accepted and rejected resume events — in a child process.

The process that drives a session workload starts and stops actor systems (which fork): it must never hold the
node's LMDB environment open itself (an environment inherited across ``fork`` is unusable, see
``shared/notes/lmdb.md``). So :func:`read_durable` runs ``python -m ouroactors.runtime.coordinator.session_dump
DATA_DIR SESSION`` and parses the JSON it prints (that module, not one of this package: see its docstring for the
second of start-up it saves). Read-only: a reader transaction beside the running system.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from ..runtime.coordinator.session_dump import dump as _dump  # noqa: F401  (the reader, for in-process callers)
from ..runtime.coordinator.session_dump import main  # ``python -m`` of this module still works

READ_TIMEOUT_S = 60.0


class DurableReadError(RuntimeError):
    """The child that reads the session's durable state failed (its stderr is in the message)."""


def read_durable(data_dir: str, session_id: str) -> dict[str, Any]:
    """``{"record", "events", "accepted", "rejected"}`` as JSON-able dicts (``record`` None: no such session)."""
    done = subprocess.run([sys.executable, "-m", "ouroactors.runtime.coordinator.session_dump", str(data_dir),
                           session_id],
                          capture_output=True, text=True, timeout=READ_TIMEOUT_S)
    if done.returncode != 0:
        raise DurableReadError(f"reading session {session_id!r} in {data_dir}: exit {done.returncode}: "
                               f"{done.stderr.strip()[-2000:]}")
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def read_journal_checks(data_dir: str, session_ids: list[str]) -> dict[str, dict[str, Any]]:
    """What ``journal verify`` and ``journal replay`` say of each session's journal (``{}``: it has none), read in a
    child process as :func:`read_durable` reads (see ``session_dump.journal_check``)."""
    done = subprocess.run([sys.executable, "-m", "ouroactors.runtime.coordinator.session_dump", "--journals",
                           str(data_dir), *session_ids], capture_output=True, text=True, timeout=READ_TIMEOUT_S)
    if done.returncode != 0:
        raise DurableReadError(f"checking the journals of {session_ids} in {data_dir}: exit {done.returncode}: "
                               f"{done.stderr.strip()[-2000:]}")
    data: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return data


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))


__all__ = ["DurableReadError", "read_durable", "read_journal_checks"]
