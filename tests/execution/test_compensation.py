"""Compensation of file writes: the pre-image kept before the write, and the checks before it is put back."""

from __future__ import annotations

import hashlib
import os
from types import SimpleNamespace

import pytest

from ouroactors.runtime.execution.tools import compensation
from ouroactors.runtime.execution.tools.compensation import CannotCompensate

from .tools_support import call, context, lease


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entry(intent: dict | None, status: str = "ok", kind: str = "file_write") -> SimpleNamespace:
    return SimpleNamespace(effect_id="s1/t1/c1", kind=kind, status=SimpleNamespace(value=status),
                           evidence={"intent": intent} if intent is not None else None)


def test_a_write_keeps_the_files_content_from_before_in_the_data_dir_before_it_replaces_it(tmp_path):
    root, _ = lease(tmp_path)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (tmp_path / "lease" / "f.txt").write_text("before\n")
    done = call("write", context(root, data_dir=str(data_dir)), path="f.txt", content="after\n")
    assert done.status == "ok" and done.evidence["preimage"] == sha(b"before\n")
    kept = data_dir / "preimages" / sha(b"before\n")
    assert kept.read_bytes() == b"before\n" and oct(kept.stat().st_mode & 0o777) == "0o600"
    edited = call("edit", context(root, data_dir=str(data_dir)), path="f.txt", old="after", new="later")
    assert edited.evidence["preimage"] == sha(b"after\n")
    created = call("write", context(root, data_dir=str(data_dir)), path="new.txt", content="x")
    assert created.evidence["preimage"] is None  # nothing before: compensating removes the file
    bare = call("write", context(root), path="f.txt", content="y")  # no data dir: nothing kept, said so
    assert bare.status == "ok" and bare.evidence["preimage"] is None


def test_compensation_puts_the_content_from_before_back_only_while_the_file_holds_what_the_write_left(tmp_path):
    data_dir, path = tmp_path / "data", tmp_path / "f.txt"
    data_dir.mkdir()
    path.write_bytes(b"after")
    os.chmod(path, 0o640)
    compensation.keep_preimage(str(data_dir), b"before")
    intent = {"path": str(path), "before": sha(b"before"), "after": sha(b"after")}
    plan = compensation.plan(entry(intent), str(data_dir))
    assert plan.intent() == {"path": str(path), "before": sha(b"after"), "after": sha(b"before")}
    path.write_bytes(b"someone else's")  # changed since the write: restoring would lose it
    with pytest.raises(CannotCompensate, match="changed since"):
        compensation.plan(entry(intent), str(data_dir))
    path.write_bytes(b"after")
    evidence = compensation.apply(compensation.plan(entry(intent), str(data_dir)))
    assert path.read_bytes() == b"before" and oct(path.stat().st_mode & 0o777) == "0o640"
    assert evidence == {"compensates": "s1/t1/c1", "path": str(path), "removed": False, "sha256": sha(b"before")}
    with pytest.raises(CannotCompensate, match="changed since"):  # done once: the file no longer holds "after"
        compensation.plan(entry(intent), str(data_dir))


def test_a_write_that_created_the_file_is_compensated_by_removing_it(tmp_path):
    path = tmp_path / "new.txt"
    path.write_bytes(b"x")
    plan = compensation.plan(entry({"path": str(path), "before": None, "after": sha(b"x")}), str(tmp_path / "data"))
    assert compensation.apply(plan)["removed"] and not path.exists()


def test_what_cannot_be_undone_safely_is_refused_by_name_and_nothing_changes(tmp_path):
    path, data_dir = tmp_path / "f.txt", tmp_path / "data"
    data_dir.mkdir()
    path.write_bytes(b"after")
    intent = {"path": str(path), "before": sha(b"never kept"), "after": sha(b"after")}
    with pytest.raises(CannotCompensate, match="was not kept"):
        compensation.plan(entry(intent), str(data_dir))
    with pytest.raises(CannotCompensate, match="'shell' effect"):
        compensation.plan(entry(intent, kind="shell"), str(data_dir))
    with pytest.raises(CannotCompensate, match="is failed: it did not write"):
        compensation.plan(entry(intent, status="failed"), str(data_dir))
    with pytest.raises(CannotCompensate, match="recorded no intent"):
        compensation.plan(entry(None), str(data_dir))
    link = tmp_path / "link.txt"
    os.symlink(path, link)
    with pytest.raises(CannotCompensate, match="a link or unreadable"):
        compensation.plan(entry({**intent, "path": str(link)}), str(data_dir))
    forged = data_dir / "preimages"
    forged.mkdir()
    (forged / sha(b"before")).write_bytes(b"not what it says")  # a pre-image must hash to its name
    with pytest.raises(CannotCompensate, match="was not kept"):
        compensation.plan(entry({**intent, "before": sha(b"before")}), str(data_dir))
    assert path.read_bytes() == b"after"


def test_a_preimage_over_the_bound_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(compensation, "MAX_PREIMAGE_BYTES", 4)
    assert compensation.keep_preimage(str(tmp_path), b"12345") is None
    assert compensation.keep_preimage(str(tmp_path), b"1234") == sha(b"1234")


def test_an_intent_naming_a_path_through_a_link_dotdot_or_into_the_data_dir_is_refused_where_it_lands(tmp_path):
    """Attack: an entry whose intent was forged (or went stale) to point compensation at another file."""
    data_dir = tmp_path / "data"
    (data_dir / "preimages").mkdir(parents=True)
    secret = data_dir / "credentials"
    secret.write_bytes(b"token")
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    (real / "f.txt").write_bytes(b"after")
    after = sha(b"after")
    for path in (str(secret), str(tmp_path / "alias" / "f.txt"), f"{real}/../real/f.txt", "real/f.txt",
                 str(data_dir / "preimages" / "x")):
        with pytest.raises(CannotCompensate, match=r"not a canonical path|inside the data dir"):
            compensation.plan(entry({"path": path, "before": None, "after": sha(b"token")}), str(data_dir))
        with pytest.raises(CannotCompensate, match=r"not a canonical path|inside the data dir"):
            compensation.plan(entry({"path": path, "before": None, "after": after}), str(data_dir))
    assert secret.read_bytes() == b"token" and (real / "f.txt").read_bytes() == b"after"
    assert compensation.plan(entry({"path": str(real / "f.txt"), "before": None, "after": after}),
                             str(data_dir)).path == str(real / "f.txt")  # the same file, named as it lands: fine
