"""Print what a session left in LMDB as JSON (``python -m ouroactors.runtime.coordinator.session_dump DIR SESSION``).

The child process behind :func:`ouroactors.faults.session_read.read_durable`. It lives here, beside the store it
reads, rather than in :mod:`ouroactors.faults`: running a module of that package imports the package first, and its
``__init__`` imports the whole fault harness (chaos, workload, runner, thespian, the authorities) — about a second
of start-up per read that the dump never uses; one read follows every run of a session crash enumeration.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def dump(data_dir: str, session_id: str) -> dict[str, Any]:
    """``{"record", "events", "accepted", "rejected", "journal", "journal_check"}`` as JSON-able dicts (``record``
    None: no such session; ``journal``: :func:`journal_outline`; ``journal_check``: :func:`journal_check`)."""
    from ...core.codec import decode
    from .keys import seen_key
    from .record import AcceptedEvent
    from .store import SessionStore

    store = SessionStore.open(data_dir)
    record = store.get(session_id)
    if record is None:
        return {"record": None, "events": [], "accepted": [], "rejected": [], "journal": [], "journal_check": {}}
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
            "rejected": [r.model_dump(mode="json") for r in store.rejections(session_id)],
            "journal": journal_outline(store.env, session_id), "journal_check": journal_check(store.env, session_id)}


MODEL_KINDS = ("turn_started", "model_call", "model_result", "gap", "truncated")
STEER_KINDS = ("steer_received", "steer", "turn_settled")


def journal_outline(env: Any, session_id: str) -> list[dict[str, Any]]:
    """The session's journal records that say which model calls each run of a turn made and which answers it
    recorded (the session check ``model-asked-again``), which steers it accepted and delivered and which turns
    settled (``steer-dropped``), and the gaps and cuts that make either unprovable."""
    from ..execution import reading

    out = []
    for r in reading.records(env, session_id):
        f = r.fields
        if r.kind in MODEL_KINDS:
            out.append({"seq": r.seq, "turn": r.turn, "kind": r.kind, "index": f.get("index"),
                        "digest": f.get("request_digest"), "ok": r.kind == "model_result" and f.get("error") is None})
        elif r.kind in STEER_KINDS:  # the session check ``steer-dropped``: accepted, delivered (by id), settled
            out.append({"seq": r.seq, "turn": r.turn, "kind": r.kind, "id": f.get("id")})
    return out


def journal_check(env: Any, session_id: str) -> dict[str, Any]:
    """What ``ouroactors journal verify`` and ``journal replay`` would say of the session's journal (the session
    check ``journal-unfaithful``): ``{}`` when it has none; else whether its chain verifies against its head and the
    ledger's anchors (the first seq that does not follow, and why), where a replay of it diverged or stopped, and
    what the ledger holds of the session that the journal lacks with no gap saying so
    (:func:`~ouroactors.runtime.execution.ledger_witness.unjournaled`; a pending gap marker excuses too), how many gap
    records it has and how many lost records a marker holds that no gap names yet."""
    from ..execution import reading, replay
    from ..execution.ledger_witness import unjournaled

    if reading.head(env, session_id) is None:
        return {}
    entries = reading.ledger_entries(env, session_id)  # read once: the anchors and the witness both need them
    verdict = reading.verify(env, session_id, reading.ledger_anchors(env, session_id, entries))
    report = replay.replay(env, session_id)
    records = reading.records(env, session_id)
    pending = reading.pending_loss(env, session_id)
    return {"verified": verdict.ok, "broken_seq": verdict.broken_seq, "reason": verdict.reason,
            "divergence": None if report.divergence is None else repr(report.divergence),
            "boundary": None if report.boundary is None else report.boundary.reason,
            "verified_turns": report.verified_turns,
            "unjournaled": unjournaled(entries, records, None if pending is None else pending.kinds),
            "gaps": sum(1 for r in records if r.kind == "gap"), "pending_lost": 0 if pending is None else pending.count}


def journal_checks(data_dir: str, session_ids: list[str]) -> dict[str, dict[str, Any]]:
    """:func:`journal_check` of each of ``session_ids`` (sessions of a runtime alone, with no session record: the
    runtime workload's)."""
    from ...authorities.storage.env import StorageConfig, open_env

    env = open_env(StorageConfig.under(data_dir))
    return {sid: journal_check(env, sid) for sid in session_ids}


USAGE = ("usage: python -m ouroactors.runtime.coordinator.session_dump DATA_DIR SESSION\n"
         "       python -m ouroactors.runtime.coordinator.session_dump --journals DATA_DIR SESSION...")


def main(argv: list[str]) -> int:
    """Exit 0 with the JSON printed; 2 on bad input (usage, a data dir with no environment, a bad session id),
    having opened nothing: a reader must not create the environment it was sent to read."""
    journals = argv[:1] == ["--journals"]
    args = argv[1:] if journals else argv
    if (len(args) < 1 if journals else len(args) != 2) or (not journals and argv[0].startswith("--")):
        print(USAGE, file=sys.stderr)
        return 2
    if not (Path(args[0]) / "lmdb").is_dir():
        print(f"session_dump: {args[0]} holds no LMDB environment (no lmdb/ directory): nothing to read",
              file=sys.stderr)
        return 2
    from ..execution.journal import JournalError

    try:
        found = journal_checks(args[0], args[1:]) if journals else dump(args[0], args[1])
    except (ValueError, JournalError) as exc:  # a session id that is none (the store's and the journal's checks)
        print(f"session_dump: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
