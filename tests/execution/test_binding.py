"""What an approval is judged against (pure over a real directory): content moves the binding, nothing else does."""

from __future__ import annotations

import os

from ouroactors.runtime.execution import binding
from ouroactors.runtime.execution.binding import judged_against, tree_digest


def tree(tmp_path):
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "build.sh").write_text("echo build\n")
    (root / "src" / "a.py").write_text("x = 1\n")
    (root / ".git").mkdir()
    (root / ".git" / "index").write_bytes(b"index v1")
    os.symlink("src/a.py", root / "link")
    return root


def test_the_tree_digest_moves_with_content_names_kinds_and_links_only(tmp_path) -> None:
    root = tree(tmp_path)
    first = tree_digest(str(root))
    assert first == tree_digest(str(root)) and first["files"] == 4 and "bounded" not in first
    os.utime(root / "build.sh", (1, 1))  # a timestamp is not content
    (root / ".git" / "index").write_bytes(b"index v2 after git status")  # git's own bookkeeping is not the tree
    assert tree_digest(str(root)) == first
    changes = [lambda: (root / "build.sh").write_text("rm -rf ~\n"),  # what the command would run
               lambda: (root / "src" / "b.py").write_text(""),  # a new file
               lambda: (root / "link").unlink() or os.symlink("build.sh", root / "link"),  # a link retargeted
               lambda: (root / "src" / "b.py").unlink() or (root / "src" / "b.py").mkdir()]  # a file now a dir
    seen = {first["sha256"]}
    for change in changes:
        change()
        now = tree_digest(str(root))["sha256"]
        assert now not in seen
        seen.add(now)


def test_a_tree_past_the_bounds_is_bound_by_sizes_and_says_so(tmp_path, monkeypatch) -> None:
    root = tree(tmp_path)
    monkeypatch.setattr(binding, "MAX_FILES", 1)
    bounded = tree_digest(str(root))
    assert bounded["bounded"] is True
    (root / "src" / "a.py").write_text("x = 2\n")  # same size: past the bound, only sizes count
    assert tree_digest(str(root))["sha256"] == bounded["sha256"]


def test_a_file_change_binds_its_before_digest_an_execute_the_tree_and_a_read_nothing(tmp_path) -> None:
    root = tree(tmp_path)
    intent = {"path": str(root / "build.sh"), "before": "ab" * 32, "after": "cd" * 32}
    assert judged_against(intent, "write", str(root)) == {"file": str(root / "build.sh"), "sha256": "ab" * 32}
    assert judged_against({"path": "p", "before": None}, "write", str(root)) == {"file": "p", "sha256": None}
    executed = judged_against(None, "execute", str(root))
    assert executed is not None and executed["sha256"] == tree_digest(str(root))["sha256"]
    assert judged_against(None, "read", str(root)) is None and judged_against(None, "network", str(root)) is None
