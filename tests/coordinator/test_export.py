"""``export_session`` on LMDB: one snapshot of everything a session's history holds; what does not decode is named."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from ouroactors.authorities.storage.env import db
from ouroactors.runtime.coordinator.errors import UnknownSession
from ouroactors.runtime.coordinator.export import export_session
from ouroactors.runtime.coordinator.keys import log_prefix
from ouroactors.runtime.execution import archive

from .support import new_record

CORPUS = Path(__file__).resolve().parents[1] / "data" / "journals" / "tools.journal"


def test_the_record_its_journal_and_what_does_not_decode(store) -> None:
    store.create(new_record("s1"))
    with store.env.begin(write=True) as txn:  # a log entry nobody can read: named, not fatal
        txn.put(log_prefix("s1") + (1).to_bytes(8, "big"), b"\xc1garbage", db=db(store.env, b"session_events"))
    doc = export_session(store.env, "s1")
    assert doc["format"] == "ouroactors.session" and doc["session"]["session_id"] == "s1"
    assert doc["events"] == [] and len(doc["unreadable"]) == 1 and "session_events" in doc["unreadable"][0]
    assert doc["journal"] is None and doc["effects"] == [] and doc["approvals"] == []
    assert doc["next_valid"] and all(isinstance(e, str) for e in doc["next_valid"])


def test_the_journal_travels_as_the_archive_journal_import_takes(store) -> None:
    store.create(new_record("s2"))
    archive.read_archive(store.env, CORPUS, session="s2")  # its journal, as a runtime would have written it
    doc = export_session(store.env, "s2")
    journal = doc["journal"]
    assert journal["ok"] and journal["records"] == 20 and journal["verified_through"] == 19
    data = base64.b64decode(journal["archive_b64"])
    assert data == archive.export_journal(store.env, "s2")
    assert bytes.fromhex(journal["head_hash"]) in data  # the archive carries the head the verdict names


def test_unknown_and_bad_ids(store) -> None:
    with pytest.raises(UnknownSession):
        export_session(store.env, "nobody")
    with pytest.raises(ValueError):
        export_session(store.env, "a/b")
