"""Property: whatever path a model sends, a file tool's target is inside the lease or the call is refused —
and a path the kernel resolves to an existing file inside the lease is not refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ouroactors.authorities.workspace.paths import under
from ouroactors.runtime.execution.tools import PathRefused
from ouroactors.runtime.execution.tools._paths import resolve_file

COMPONENTS = ["..", ".", "", "sub", "f.txt", "in", "out", "abs_out", "up", "loop", "proc", "missing", "secret.txt",
              "lease"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("paths")
    root, outside = base / "lease", base / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "f.txt").write_text("f")
    (root / "sub" / "f.txt").write_text("g")
    (outside / "secret.txt").write_text("s")
    os.symlink("sub", root / "in")
    os.symlink("../outside", root / "out")
    os.symlink("/etc", root / "abs_out")
    os.symlink("..", root / "sub" / "up")
    os.symlink("loop", root / "loop")
    os.symlink("/proc/self/root", root / "sub" / "proc")
    return os.path.realpath(root)


paths = st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=6).map("/".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=paths, absolute=st.booleans(), parents=st.sampled_from(["exist", "plan"]))
def test_targets_stay_inside_and_inside_files_are_reachable(tree: str, path: str, absolute: bool,
                                                             parents: str) -> None:
    raw = f"{tree}/{path}" if absolute else path
    kernel = os.path.realpath(os.path.join(tree, raw))
    try:
        target = resolve_file(raw, tree, "read", parents)  # type: ignore[arg-type]
    except PathRefused:
        # the kernel's own walk (stat of the path as given): realpath alone is lexical about a '..' after a file,
        # which the kernel refuses (ENOTDIR): 'f.txt/../f.txt' reaches nothing
        reachable = (os.path.isfile(os.path.join(tree, raw)) and os.path.isfile(kernel) and under(kernel, tree)
                     and not raw.endswith(("/", "/.", "/..")))
        assert not (reachable and raw not in ("", ".", "..")), f"refused {raw!r}, the kernel reaches {kernel}"
        return
    assert under(target.path, tree), f"{raw!r} -> {target.path}"
    if target.exists:
        assert os.path.realpath(target.path) == target.path == kernel
    for made in target.created:
        assert under(made, tree) and not os.path.exists(made)


def test_the_tree_is_what_the_property_assumes(tree: str) -> None:
    assert Path(tree, "in", "f.txt").read_text() == "g" and Path(tree, "sub", "up", "f.txt").read_text() == "f"
    assert os.path.realpath(f"{tree}/out/secret.txt").endswith("/outside/secret.txt")


def _answer(fn, *args):  # what a call gives: its result, or the error's type and text
    try:
        return fn(*args)
    except Exception as exc:
        return type(exc), str(exc)


def test_the_root_as_dot_answers_as_the_whole_canonicalisation(tmp_path: Path) -> None:
    """``canonical_dir(".", root)`` walks the root once; it answers what ``canonicalize`` answers, on disk, for a
    canonical root, a root that is a link (to inside and to outside its parent), a file, and a missing root."""
    from ouroactors.authorities.workspace.paths import canonicalize
    from ouroactors.runtime.execution.tools._paths import canonical_dir

    base = Path(os.path.realpath(tmp_path))
    (base / "real").mkdir()
    (base / "file").write_text("x")
    os.symlink("real", base / "link")
    os.symlink("/etc", base / "abs_link")
    os.symlink("loop", base / "loop")
    for name in ("real", "link", "abs_link", "file", "missing", "loop"):
        root = str(base / name)
        whole = _answer(lambda r: canonicalize(".", allowed_roots=(r,), cwd=r), root)
        assert _answer(canonical_dir, ".", root) == whole, name
    assert canonical_dir(".", str(base / "real")) == str(base / "real")
