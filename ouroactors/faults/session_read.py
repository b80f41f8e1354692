"""Read what a session left in LMDB — record, event log, accepted and rejected resume events — in a child process.

The process that drives a session workload starts and stops actor systems (which fork): it must never hold the
node's LMDB environment open itself (an environment inherited across ``fork`` is unusable, see
``shared/notes/lmdb.md``). So :func:`read_durable` runs this module as ``python -m ouroactors.faults.session_read
DATA_DIR SESSION`` and parses the JSON it prints. Read-only: a reader transaction beside the running system.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

READ_TIMEOUT_S = 60.0


class DurableReadError(RuntimeError):
    """The child that reads the session's durable state failed (its stderr is in the message)."""


def _dump(data_dir: str, session_id: str) -> dict[str, Any]:
    from ..core.codec import decode
    from ..runtime.coordinator.keys import seen_key
    from ..runtime.coordinator.record import AcceptedEvent
    from ..runtime.coordinator.store import SessionStore

    store = SessionStore.open(data_dir)
    record = store.get(session_id)
    if record is None:
        return {"record": None, "events": [], "accepted": [], "rejected": []}
    prefix = seen_key(session_id, "x")[:-1]
    accepted = []
    with store.env.begin(db=store.resumes) as txn:
        cursor = txn.cursor()
        if cursor.set_range(prefix):
            for key, raw in cursor:
                if not bytes(key).startswith(prefix):
                    break
                accepted.append(decode(bytes(raw), AcceptedEvent).model_dump(mode="json"))
    events: list[dict[str, Any]] = []
    while True:
        batch = store.events(session_id, events[-1]["cursor"] if events else 0, 1000)
        if not batch:
            break
        events.extend(e.model_dump(mode="json") for e in batch)
    return {"record": record.model_dump(mode="json"), "events": events, "accepted": accepted,
            "rejected": [r.model_dump(mode="json") for r in store.rejections(session_id)]}


def read_durable(data_dir: str, session_id: str) -> dict[str, Any]:
    """``{"record", "events", "accepted", "rejected"}`` as JSON-able dicts (``record`` None: no such session)."""
    done = subprocess.run([sys.executable, "-m", "ouroactors.faults.session_read", str(data_dir), session_id],
                          capture_output=True, text=True, timeout=READ_TIMEOUT_S)
    if done.returncode != 0:
        raise DurableReadError(f"reading session {session_id!r} in {data_dir}: exit {done.returncode}: "
                               f"{done.stderr.strip()[-2000:]}")
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m ouroactors.faults.session_read DATA_DIR SESSION", file=sys.stderr)
        return 2
    print(json.dumps(_dump(argv[0], argv[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))


__all__ = ["DurableReadError", "read_durable"]
