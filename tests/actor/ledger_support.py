"""Shared pieces of the storage/ledger actor tests: the agent tree, requests, read-backs."""

from __future__ import annotations

from typing import Any

from ouroactors import supervisor, worker
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.ledger.actor import GetEntry, ListEntries, RecordSettled, RecordStarted
from ouroactors.authorities.ledger.domain import Entry, LedgerError, StartRequest, fingerprint
from ouroactors.supervision.protocol import Stamped
from ouroactors.supervision.specs import ChildSpec

from .helpers import ECHO

STORAGE = "ouroactors.authorities.storage.actor:Storage"
LEDGER = "ouroactors.authorities.ledger.actor:Ledger"
LEDGER_PATH = "agent/ledger"
STORAGE_PATH = "agent/storage"
CONSUMER_PATH = "agent/consumer"


def agent_tree(ledger_kwargs: dict[str, Any] | None = None, storage_kwargs: dict[str, Any] | None = None
               ) -> ChildSpec:
    return supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", STORAGE, **({"kwargs": storage_kwargs} if storage_kwargs else {})),
        worker("ledger", LEDGER, **({"kwargs": ledger_kwargs} if ledger_kwargs else {})),
        worker("consumer", ECHO),
    ])


def start_request(effect_id: str, kind: str = "tool_call", session: str | None = "s1",
                  args: Any = None, cause: str | None = None) -> StartRequest:
    arguments = args if args is not None else {"id": effect_id}
    return StartRequest(
        effect_id=effect_id, kind=kind, idempotency_key=f"idem-{effect_id}",
        fingerprint=fingerprint(kind, arguments), principal="tests", session_id=session,
        turn_id="t1", call_id=f"call-{effect_id}", authority={"storage": 1}, grant="grant-1", cause=cause,
    )


def started(effect_id: str, **kwargs: Any) -> RecordStarted:
    return RecordStarted(start_request(effect_id, **kwargs))


def settled(effect_id: str, status: str = "ok", **kwargs: Any) -> RecordSettled:
    return RecordSettled(effect_id, status, **kwargs)


def all_entries(system: Any) -> dict[str, Entry]:
    entries = ask_authority(system, LEDGER_PATH, ListEntries(limit=100_000), timeout=10.0)
    return {entry.effect_id: entry for entry in entries}


def get_entry(system: Any, effect_id: str) -> Any:
    """The entry (an :class:`Entry`), or None when the ledger has no such effect."""
    try:
        return ask_authority(system, LEDGER_PATH, GetEntry(effect_id))
    except LedgerError as exc:
        assert "no effect" in str(exc), exc
        return None


def counts(system: Any) -> dict[str, int]:
    return ask_authority(system, LEDGER_PATH, "status")["counts"]


def pids(system: Any) -> dict[str, int | None]:
    return {child.id: child.pid for child in system.which_children("agent")}


def kill_and_wait(system: Any, path: str, restarted_last: str = CONSUMER_PATH) -> int:
    """SIGKILL ``path``; return once rest_for_one has started ``restarted_last`` again."""
    mark = system.mark()
    pid = system.kill(path)
    system.wait_for("exited", path, after=mark, predicate=lambda e: e.reason == {"kind": "killed"})
    system.wait_for("started", restarted_last, after=mark)
    return pid


def stamped(system: Any, path: str, message: Any) -> Stamped:
    """``message`` stamped with the current generation of ``path`` (for asks on a raw endpoint)."""
    return Stamped(system.child_info(path).generation, message)
