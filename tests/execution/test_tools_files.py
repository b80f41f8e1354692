"""The file tools on real files, real symlinks and a real FIFO: confinement to the lease, atomic writes, edits."""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

import pytest
import trio

from ouroactors.core.codec import digest_of
from ouroactors.runtime.execution.model import ToolCall
from ouroactors.runtime.execution.tools import PathRefused, ToolOutcome, parse_call
from ouroactors.runtime.execution.tools._paths import resolve_file
from ouroactors.runtime.execution.tools.files import _atomic_write, _guarded, _read_regular, occurrences

from .tools_support import call, context, lease, run_only


def refusal(name: str, root: str, **arguments: object) -> PathRefused:
    """The typed refusal from the grant step, and the same refusal (as a failed outcome) from ``run``."""
    ctx = context(root)
    tool, args = parse_call(ToolCall(id="c", name=name, arguments=arguments))
    with pytest.raises(PathRefused) as err:
        tool.grant_request(args, ctx)
    outcome = run_only(name, ctx, **arguments)
    assert outcome.status == "failed" and outcome.error_kind == err.value.kind, outcome
    return err.value


# -- attacks: every way out of the lease ------------------------------------------------------------


@pytest.mark.parametrize("tool", ["read", "write", "edit"])
def test_dotdot_and_absolute_paths_outside_are_refused(tmp_path: Path, tool: str) -> None:
    root, outside = lease(tmp_path)
    extra = {"content": "x"} if tool == "write" else {"old": "top", "new": "x"} if tool == "edit" else {}
    for path in ("../outside/secret.txt", f"{outside}/secret.txt", "sub/../../outside/secret.txt"):
        if path.startswith("sub"):
            os.makedirs(f"{root}/sub", exist_ok=True)
        err = refusal(tool, root, path=path, **extra)
        assert err.kind == "path_escapes", err
        assert "escapes" in str(err)
    assert Path(outside, "secret.txt").read_text() == "top secret\n"


def test_proc_self_is_outside(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    for path in ("/proc/self/root/etc/passwd", "/proc/self/environ", "/etc/passwd"):
        assert refusal("read", root, path=path).kind == "path_escapes"
    os.symlink("/proc/self/root/etc", f"{root}/etc")
    assert refusal("read", root, path="etc/passwd").kind == "path_escapes"


def test_symlinked_directory_pointing_out_is_refused(tmp_path: Path) -> None:
    root, outside = lease(tmp_path)
    os.symlink(outside, f"{root}/out")
    assert refusal("read", root, path="out/secret.txt").kind == "path_escapes"
    assert refusal("write", root, path="out/new.txt", content="x").kind == "path_escapes"
    assert refusal("list", root, path="out").kind == "path_escapes"
    assert not Path(outside, "new.txt").exists()


def test_symlink_at_the_last_component_pointing_out_is_refused(tmp_path: Path) -> None:
    root, outside = lease(tmp_path)
    os.symlink("../outside/secret.txt", f"{root}/leak.txt")
    os.symlink(f"{outside}/fresh.txt", f"{root}/dangling.txt")  # a write would create it outside
    assert refusal("read", root, path="leak.txt").kind == "path_escapes"
    assert refusal("write", root, path="leak.txt", content="pwned").kind == "path_escapes"
    assert refusal("edit", root, path="leak.txt", old="top", new="pwned").kind == "path_escapes"
    assert refusal("write", root, path="dangling.txt", content="pwned").kind == "path_escapes"
    assert Path(outside, "secret.txt").read_text() == "top secret\n"
    assert not Path(outside, "fresh.txt").exists()


def test_symlink_loops_are_named(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    os.symlink("b", f"{root}/a")
    os.symlink("a", f"{root}/b")
    assert refusal("read", root, path="a").kind == "symlink_loop"
    os.symlink("d2/x", f"{root}/d1")
    os.symlink("d1/x", f"{root}/d2")
    assert refusal("read", root, path="d1/f").kind in ("symlink_loop", "not_found")


def test_links_inside_the_lease_are_followed_to_their_target(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    os.makedirs(f"{root}/real")
    Path(root, "real", "f.txt").write_text("inside\n")
    os.symlink("real/f.txt", f"{root}/alias.txt")
    os.symlink("real", f"{root}/dir")
    assert call("read", context(root), path="alias.txt").output == "inside\n"
    assert call("read", context(root), path="dir/../real/f.txt").output == "inside\n"
    out = call("write", context(root), path="alias.txt", content="changed\n")
    assert out.status == "ok" and out.evidence["path"] == f"{root}/real/f.txt"
    assert os.path.islink(f"{root}/alias.txt") and Path(root, "real", "f.txt").read_text() == "changed\n"


def test_a_fifo_is_refused_instead_of_blocking(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    os.mkfifo(f"{root}/pipe")
    out = call("read", context(root), path="pipe")
    assert out.status == "failed" and out.error_kind == "not_a_file"
    assert call("write", context(root), path="pipe", content="x").error_kind == "not_a_file"
    assert call("edit", context(root), path="pipe", old="a", new="b").error_kind == "not_a_file"


def test_a_symlink_planted_after_the_check_is_not_followed_by_read(tmp_path: Path) -> None:
    root, outside = lease(tmp_path)
    Path(root, "f.txt").write_text("mine\n")
    target = resolve_file("f.txt", root, "read")  # checked while it was a regular file ...
    os.unlink(f"{root}/f.txt")
    os.symlink(f"{outside}/secret.txt", f"{root}/f.txt")  # ... swapped before the open
    with pytest.raises(PathRefused) as err:
        _read_regular(target, root, "read", 1000)
    assert err.value.kind == "path_changed"


def test_a_symlink_planted_after_the_check_is_replaced_not_written_through(tmp_path: Path) -> None:
    root, outside = lease(tmp_path)
    target = resolve_file("f.txt", root, "write")
    os.symlink(f"{outside}/secret.txt", f"{root}/f.txt")
    _atomic_write(target, root, "write", b"new\n", None)
    assert Path(outside, "secret.txt").read_text() == "top secret\n"
    assert not os.path.islink(f"{root}/f.txt") and Path(root, "f.txt").read_text() == "new\n"


def test_a_directory_swapped_for_a_link_after_the_check_is_refused(tmp_path: Path) -> None:
    root, outside = lease(tmp_path)
    os.makedirs(f"{root}/sub")
    target = resolve_file("sub/f.txt", root, "write")
    os.rename(f"{root}/sub", f"{root}/sub.old")
    os.symlink(outside, f"{root}/sub")
    with pytest.raises(PathRefused) as err:
        _atomic_write(target, root, "write", b"x", None)
    assert err.value.kind == "path_changed"
    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_an_intermediate_directory_swapped_after_the_check_is_caught_after_open(tmp_path: Path) -> None:
    root, outside = lease(tmp_path)
    os.makedirs(f"{root}/a/b")
    os.makedirs(f"{outside}/b")
    target = resolve_file("a/b/f.txt", root, "write")
    os.rename(f"{root}/a", f"{root}/a.old")
    os.symlink(outside, f"{root}/a")  # a/b now opens outside/b: O_NOFOLLOW guards only the last component
    with pytest.raises(PathRefused) as err:
        _atomic_write(target, root, "write", b"x", None)
    assert err.value.kind == "path_changed" and "changed while opening" in str(err.value)
    assert os.listdir(f"{outside}/b") == []


# -- read -------------------------------------------------------------------------------------------


def test_read_cap_is_reported(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    Path(root, "big.txt").write_text("é" * 1000)  # 2000 bytes, two-byte characters
    out = call("read", context(root, output_cap_bytes=101), path="big.txt")
    assert out.truncated and out.output_cap_bytes == 101
    assert out.output == "é" * 50  # cut on a character edge
    assert "[output truncated at 101 bytes]" in out.for_model()
    whole = call("read", context(root), path="big.txt")
    assert not whole.truncated and whole.evidence["size"] == 2000


def test_read_lines(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    Path(root, "f.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    assert call("read", context(root), path="f.txt", offset=2, limit=3).output == "line 2\nline 3\nline 4\n"
    assert call("read", context(root), path="f.txt", offset=9).output == "line 9\n"
    out = call("read", context(root), path="missing.txt")
    assert out.status == "failed" and out.error_kind == "not_found"
    assert refusal("read", root, path="nodir/f.txt").kind == "not_found"


# -- write ------------------------------------------------------------------------------------------


def test_write_is_atomic_keeps_the_mode_and_leaves_no_temp(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    Path(root, "f.sh").write_text("old\n")
    os.chmod(f"{root}/f.sh", 0o750)
    inode = os.stat(f"{root}/f.sh").st_ino
    out = call("write", context(root), path="f.sh", content="new content\n")
    assert out.status == "ok" and out.evidence["created"] is False and out.evidence["bytes_written"] == 12
    st = os.stat(f"{root}/f.sh")
    assert stat.S_IMODE(st.st_mode) == 0o750 and st.st_ino != inode  # a new inode renamed into place
    assert sorted(os.listdir(root)) == ["f.sh"]
    fresh = call("write", context(root), path="new.txt", content="")
    assert fresh.evidence["created"] is True and Path(root, "new.txt").read_text() == ""


def test_write_refuses_a_directory_and_a_trailing_slash(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    os.makedirs(f"{root}/d")
    assert call("write", context(root), path="d", content="x").error_kind == "not_a_file"
    assert refusal("write", root, path="d/", content="x").kind == "is_a_directory"
    assert refusal("write", root, path="..", content="x").kind == "is_a_directory"
    assert os.path.isdir(f"{root}/d")


def test_a_reader_never_sees_a_half_written_file(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    big_a, big_b = "a" * 2_000_000, "b" * 2_000_000
    Path(root, "f.txt").write_text(big_a)
    stop = threading.Event()
    seen: set[str] = set()

    def reader() -> None:
        while not stop.is_set():
            data = Path(root, "f.txt").read_text()
            seen.add("ok" if data in (big_a, big_b) else f"torn {len(data)}")

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(6):
            assert call("write", context(root), path="f.txt", content=big_b if i % 2 else big_a).status == "ok"
    finally:
        stop.set()
        thread.join()
    assert seen == {"ok"}


def test_write_makes_missing_directories_only_when_it_runs(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    tool, args = parse_call(ToolCall(id="c", name="write", arguments={"path": "src/pkg/m.py", "content": "x"}))
    assert tool.grant_request(args, context(root)).paths == (f"{root}/src/pkg/m.py",)
    assert os.listdir(root) == []  # judging the request made nothing
    out = call("write", context(root), path="src/pkg/m.py", content="x")
    assert out.status == "ok" and out.evidence["dirs_created"] == [f"{root}/src", f"{root}/src/pkg"]
    assert Path(root, "src", "pkg", "m.py").read_text() == "x"
    assert refusal("write", root, path="other/m.py", content="x", make_dirs=False).kind == "not_found"
    assert not Path(root, "other").exists()


def test_made_directories_never_leave_the_lease(tmp_path: Path) -> None:
    root, outside = lease(tmp_path)
    os.symlink(outside, f"{root}/out")
    os.symlink(f"{outside}/nowhere", f"{root}/dangling")
    Path(root, "file").write_text("")
    assert refusal("write", root, path="out/new/x.txt", content="x").kind == "path_escapes"
    assert refusal("write", root, path="dangling/new/x.txt", content="x").kind == "path_escapes"
    assert refusal("write", root, path="../outside/new/x.txt", content="x").kind == "path_escapes"
    assert refusal("write", root, path="new/../../outside/x.txt", content="x").kind == "not_found"
    assert refusal("write", root, path="file/new/x.txt", content="x").kind == "not_a_directory"
    assert sorted(os.listdir(outside)) == ["secret.txt"] and not os.path.exists(f"{outside}/nowhere")
    assert sorted(os.listdir(root)) == ["dangling", "file", "out"]


# -- edit -------------------------------------------------------------------------------------------


def test_edit_refuses_ambiguous_and_missing_matches_saying_how_many(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    Path(root, "f.py").write_text("x = 1\ny = 1\nz = 1\n")
    before = os.stat(f"{root}/f.py")
    out = call("edit", context(root), path="f.py", old=" = 1", new=" = 2")
    assert out.status == "failed" and out.error_kind == "ambiguous_match" and out.evidence["matches"] == 3
    assert "found 3 times" in (out.error or "") and "nothing changed" in (out.error or "")
    none = call("edit", context(root), path="f.py", old="w = 1", new="w = 2")
    assert none.error_kind == "no_match" and none.evidence["matches"] == 0
    after = os.stat(f"{root}/f.py")
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert Path(root, "f.py").read_text() == "x = 1\ny = 1\nz = 1\n"


def test_edit_counts_overlapping_matches() -> None:
    assert occurrences("aaa", "aa") == 2 and occurrences("abc", "d") == 0 and occurrences("abab", "ab") == 2


def test_edit_replaces_exactly_one_or_all(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    Path(root, "f.py").write_text("x = 1\ny = 1\n")
    out = call("edit", context(root), path="f.py", old="y = 1", new="y = 2")
    assert out.status == "ok" and out.evidence["replacements"] == 1
    assert Path(root, "f.py").read_text() == "x = 1\ny = 2\n"
    out = call("edit", context(root), path="f.py", old=" = ", new=" := ", replace_all=True)
    assert out.evidence["replacements"] == 2 and Path(root, "f.py").read_text() == "x := 1\ny := 2\n"
    assert out.evidence["sha256_before"] != out.evidence["sha256"]


def test_edit_refuses_binary(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    Path(root, "b.bin").write_bytes(b"\xff\xfe\x00abc")
    out = call("edit", context(root), path="b.bin", old="abc", new="x")
    assert out.error_kind == "not_text" and Path(root, "b.bin").read_bytes() == b"\xff\xfe\x00abc"


# -- list -------------------------------------------------------------------------------------------


def test_list_shows_links_without_following_them(tmp_path: Path) -> None:
    root, outside = lease(tmp_path)
    os.makedirs(f"{root}/src/pkg")
    Path(root, "src", "pkg", "m.py").write_text("pass\n")
    Path(root, "README").write_text("hi")
    os.symlink(outside, f"{root}/out")
    flat = call("list", context(root))
    assert flat.output.splitlines() == ["README (2 bytes)", f"out -> {outside}", "src/"]
    deep = call("list", context(root), recursive=True)
    assert deep.output.splitlines() == ["README (2 bytes)", f"out -> {outside}", "src/", "src/pkg/",
                                        "src/pkg/m.py (5 bytes)"]
    assert "secret" not in deep.output
    capped = call("list", context(root), recursive=True, max_entries=2)
    assert capped.truncated and capped.evidence["complete"] is False and len(capped.output.splitlines()) == 2
    assert call("list", context(root), path="src").output == "pkg/"
    assert refusal("list", root, path="..").kind == "path_escapes"


def test_paths_that_are_not_text_are_refused_by_type(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    for bad in ("a\ud800", "a\0b", ""):
        with pytest.raises(PathRefused) as err:
            resolve_file(bad, root, "read")
        assert err.value.kind == "invalid_path"


def test_names_that_are_not_utf8_are_shown_escaped_and_the_outcome_stays_journal_able(tmp_path: Path) -> None:
    """A command may create any bytes as a name; every tool must still answer with canonical-encodable text."""
    root, _ = lease(tmp_path)
    broot = os.fsencode(root)
    Path(os.fsdecode(os.path.join(broot, b"\xff.txt"))).write_text("x")
    os.symlink(b"\xfe", os.path.join(broot, b"lnk"))
    os.symlink(b"\xff.txt", os.path.join(broot, b"ok"))
    listed = call("list", context(root))
    assert listed.status == "ok" and "\\xff.txt (1 bytes)" in listed.output and "lnk -> \\xfe" in listed.output
    for out in (listed, call("read", context(root), path="ok"), call("write", context(root), path="ok", content="y"),
                call("edit", context(root), path="ok", old="y", new="z")):
        assert out.status == "ok", out
        digest_of(out.model_dump(mode="json"))  # the journal's canonical bytes: no lone surrogate anywhere
    assert Path(os.fsdecode(os.path.join(broot, b"\xff.txt"))).read_text() == "z"


def test_counting_matches_in_a_pathological_file_is_fast(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    Path(root, "a.txt").write_text("a" * 4_000_000)
    out = call("edit", context(root), path="a.txt", old="aa", new="b")
    assert out.error_kind == "ambiguous_match" and out.evidence["matches"] == 2_000_000
    assert out.duration_ms < 2000


def test_a_very_deep_tree_is_listed_to_a_bounded_depth(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    deep = root
    for _ in range(1200):  # deeper than Python's recursion limit
        os.mkdir(os.path.join(deep, "d"))
        deep = os.path.join(deep, "d")
    Path(root, "z.txt").write_text("after")
    try:
        out = call("list", context(root), recursive=True, max_entries=10_000)
        assert out.status == "ok" and out.evidence["complete"] is False and out.truncated
        assert len(out.output.splitlines()) == 33 and out.output.splitlines()[-1] == "z.txt (5 bytes)"
    finally:
        # Removed here, bottom up: left behind, it makes pytest's later clean-up of old temp dirs
        # (shutil.rmtree, recursive) die with RecursionError in a *later* run, with no summary.
        while deep != root:
            os.rmdir(deep)
            deep = os.path.dirname(deep)


def test_io_errors_are_failed_outcomes_not_crashes(tmp_path: Path) -> None:
    """An OSError the file work did not expect (EIO, a race) settles as failed; the loop never sees it raised."""
    root, _ = lease(tmp_path)

    def broken(args: object, ctx: object, started: float) -> ToolOutcome:
        raise OSError(errno.EIO, "Input/output error")

    out = trio.run(lambda: _guarded("read", broken, None, context(root), path="f.txt"))
    assert out.status == "failed" and out.error_kind == "io_error" and "Input/output error" in (out.error or "")
    assert out.evidence == {"path": "f.txt"}


# -- intent: what a write means to leave behind, for the ledger's reconciler --------------------------


def intent_of(name: str, root: str, **arguments: object) -> dict | None:
    tool, args = parse_call(ToolCall(id="c", name=name, arguments=arguments))
    return tool.intent(args, context(root))


def test_a_writes_intent_names_the_canonical_path_and_the_digests_before_and_after(tmp_path: Path) -> None:
    import hashlib

    root, _ = lease(tmp_path)
    sha = lambda data: hashlib.sha256(data).hexdigest()  # noqa: E731
    created = intent_of("write", root, path="new/out.txt", content="hello")
    assert created == {"path": os.path.join(root, "new", "out.txt"), "before": None, "after": sha(b"hello")}
    assert not (Path(root) / "new").exists()  # working it out changed nothing
    (Path(root) / "f.txt").write_text("a b a")
    assert intent_of("write", root, path="f.txt", content="x") == {
        "path": os.path.join(root, "f.txt"), "before": sha(b"a b a"), "after": sha(b"x")}
    assert intent_of("edit", root, path="f.txt", old="b", new="c") == {
        "path": os.path.join(root, "f.txt"), "before": sha(b"a b a"), "after": sha(b"a c a")}
    assert intent_of("edit", root, path="f.txt", old="a", new="c", replace_all=True)["after"] == sha(b"c b c")
    # an edit that would not write, or a path the run refuses: no intent (the run reports what is wrong)
    assert intent_of("edit", root, path="f.txt", old="a", new="c") is None  # ambiguous
    assert intent_of("edit", root, path="f.txt", old="zzz", new="c") is None
    assert intent_of("edit", root, path="missing.txt", old="a", new="c") is None
    assert intent_of("write", root, path="../outside.txt", content="x") is None
    assert intent_of("read", root, path="f.txt") is None
    assert (Path(root) / "f.txt").read_text() == "a b a"
