"""A session's configuration table, kept durably beside its record (``session_resume``: ``session/config``).

Recovery must start a replacement runtime with the very configuration the session was created
with, from durable state alone (a coordinator restarted by the boot sweep knows only the session
id). :class:`~.record.SessionRecord` pins versions but does not hold the table, so it is stored
here, in the transaction that creates the record (neither is ever stored without the other); it
never changes afterwards (a changed configuration is a new session). The key cannot collide with
the store's own (``/s/``, ``/r/``, ``/n`` in :mod:`.keys`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from ...authorities.storage.commit import Outcome, write
from .record import check_id
from .store import SessionStore

MAX_CONFIG_BYTES = 32_000


def lease_key(session_id: str) -> bytes:
    return check_id(session_id, "session_id").encode() + b"/lease"


def put_lease(store: SessionStore, session_id: str, lease: dict[str, Any]) -> Outcome[None]:
    """Keep the workspace lease of the session's runtime (id, root, mode and its one-time capability).

    The capability is the proof a recovering coordinator presents to reclaim the reservation the
    lease becomes when its owner (the runtime) dies; it lives here, beside the record, in the
    node's private environment (0600, like the operator credentials).
    """
    body = msgpack.packb(lease, use_bin_type=True)
    key = lease_key(session_id)

    def run(txn: Any) -> None:
        txn.put(key, body, db=store.resumes)

    return write(store.env, run, fence=store.fence)


def get_lease(store: SessionStore, session_id: str) -> dict[str, Any] | None:
    with store.env.begin(db=store.resumes) as txn:
        raw = txn.get(lease_key(session_id))
    value = None if raw is None else msgpack.unpackb(bytes(raw), raw=False)
    return value if isinstance(value, dict) else None


def runtime_key(session_id: str) -> bytes:
    return check_id(session_id, "session_id").encode() + b"/runtime"


def put_runtime(store: SessionStore, session_id: str, key: str, generation: int) -> Outcome[None]:
    """Where the session's latest runtime lives (its child key under ``agent/execution``, its generation).

    The record names the runtime by id and generation; this says where to ask, so recovery probes
    one child (``which_child``) rather than listing every runtime of the node, and finds a runtime
    left open when a coordinator died between a turn's last checkpoint and closing it.
    """
    body = msgpack.packb({"key": key, "generation": generation}, use_bin_type=True)
    where = runtime_key(session_id)

    def run(txn: Any) -> None:
        txn.put(where, body, db=store.resumes)

    return write(store.env, run, fence=store.fence)


def get_runtime(store: SessionStore, session_id: str) -> dict[str, Any] | None:
    with store.env.begin(db=store.resumes) as txn:
        raw = txn.get(runtime_key(session_id))
    value = None if raw is None else msgpack.unpackb(bytes(raw), raw=False)
    return value if isinstance(value, dict) else None


def config_key(session_id: str) -> bytes:
    return check_id(session_id, "session_id").encode() + b"/config"


def config_writer(store: SessionStore, session_id: str, config: dict[str, Any]) -> Callable[[Any], None]:
    """What puts ``session_id``'s configuration inside a transaction (the session's creation: one commit for the
    record and its configuration, and neither without the other). Raises ValueError for an oversized one, before
    any transaction."""
    body = msgpack.packb(config, use_bin_type=True)
    if len(body) > MAX_CONFIG_BYTES:
        raise ValueError(f"session {session_id!r}: config is {len(body)} bytes, at most {MAX_CONFIG_BYTES}")
    key = config_key(session_id)

    def put(txn: Any) -> None:
        txn.put(key, body, db=store.resumes)

    return put


def get_config(store: SessionStore, session_id: str) -> dict[str, Any] | None:
    with store.env.begin(db=store.resumes) as txn:
        raw = txn.get(config_key(session_id))
    if raw is None:
        return None
    value = msgpack.unpackb(bytes(raw), raw=False)
    return value if isinstance(value, dict) else None


__all__ = ["config_key", "config_writer", "get_config", "get_lease", "get_runtime", "lease_key", "put_lease",
           "put_runtime", "runtime_generations", "runtime_key"]


def runtime_generations(store: SessionStore, session_ids: list[str]) -> dict[str, int]:
    """Per session, the generation of the last runtime started for it (:func:`put_runtime`), in one transaction."""
    out: dict[str, int] = {}
    with store.env.begin(db=store.resumes) as txn:
        for sid in session_ids:
            raw = txn.get(runtime_key(sid))
            value = None if raw is None else msgpack.unpackb(bytes(raw), raw=False)
            if isinstance(value, dict) and isinstance(value.get("generation"), int):
                out[sid] = value["generation"]
    return out
