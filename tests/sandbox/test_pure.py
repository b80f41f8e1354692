"""Pure parts: the argv, the failure classification table, mode parsing (fails closed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ouroactors.runtime.sandbox import (
    DEFAULT_LANG,
    DEFAULT_PATH,
    NONE_BOUNDARY,
    SandboxError,
    SandboxMode,
    SandboxUnavailable,
    build_argv,
    bwrap_boundary,
    classify,
    run,
)


def _pairs(argv: list[str], flag: str, arity: int) -> list[tuple[str, ...]]:
    return [tuple(argv[i + 1:i + 1 + arity]) for i, a in enumerate(argv[:argv.index("--")]) if a == flag]


def test_full_argv_without_network(tmp_path: Path) -> None:
    ws = str(tmp_path)
    assert build_argv(["sh", "-c", "echo hi"], workspace=ws, allow_network=False) == [
        "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--bind", ws, ws,
        "--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--chdir", ws, "--clearenv",
        "--setenv", "PATH", DEFAULT_PATH, "--setenv", "HOME", ws, "--setenv", "LANG", DEFAULT_LANG,
        "--", "sh", "-c", "echo hi"]


def test_network_is_shared_back_only_when_granted(tmp_path: Path) -> None:
    closed = build_argv(["true"], workspace=str(tmp_path), allow_network=False)
    opened = build_argv(["true"], workspace=str(tmp_path), allow_network=True)
    assert "--share-net" not in closed and "--unshare-all" in closed
    i = opened.index("--unshare-all")
    assert opened[i + 1] == "--share-net"  # after --unshare-all, or it would be undone
    assert [a for a in opened if a != "--share-net"] == closed


def test_bwrap_binary_and_command_are_verbatim(tmp_path: Path) -> None:
    argv = build_argv(["--looks-like-a-flag", "--", "x y"], workspace=str(tmp_path), allow_network=False,
                      bwrap="/opt/bwrap")
    assert argv[0] == "/opt/bwrap"
    sep = argv.index("--")
    assert argv[sep + 1:] == ["--looks-like-a-flag", "--", "x y"]


def test_tmpfs_comes_before_the_workspace_bind(tmp_path: Path) -> None:
    # a workspace under /tmp must be bound over the fresh tmpfs, not hidden by it
    argv = build_argv(["true"], workspace=str(tmp_path), allow_network=False)
    assert argv.index("--tmpfs") < argv.index("--bind")
    assert _pairs(argv, "--tmpfs", 1) == [("/tmp",)]


def test_workspace_is_canonicalised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.chdir(tmp_path)
    for given in (str(tmp_path / "link"), "link", "./real/../real/"):
        argv = build_argv(["true"], workspace=given, allow_network=False)
        assert _pairs(argv, "--bind", 2) == [(str(real), str(real))]
        assert _pairs(argv, "--chdir", 1) == [(str(real),)]
        assert ("HOME", str(real)) in _pairs(argv, "--setenv", 2)


@pytest.mark.parametrize("bad", ["missing", "a_file", "/"])
def test_workspace_must_be_an_existing_directory_other_than_root(tmp_path: Path, bad: str) -> None:
    (tmp_path / "a_file").write_text("x")
    path = bad if bad == "/" else str(tmp_path / bad)
    with pytest.raises(SandboxError):
        build_argv(["true"], workspace=path, allow_network=False)


def test_extra_read_only_paths_follow_the_workspace_bind(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "ln").symlink_to(tmp_path / ".git")
    argv = build_argv(["true"], workspace=str(tmp_path), allow_network=False, extra_ro=(str(tmp_path / "ln"),))
    git = str(tmp_path / ".git")
    assert _pairs(argv, "--ro-bind", 2) == [("/", "/"), (git, git)]
    assert argv.index("--bind") < len(argv) - argv[::-1].index("--ro-bind") - 1


def test_missing_extra_read_only_path_is_refused_not_created(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="does not exist"):
        build_argv(["true"], workspace=str(tmp_path), allow_network=False, extra_ro=(str(tmp_path / "nope"),))
    assert not (tmp_path / "nope").exists()


def test_environment_is_cleared_then_minimal_plus_given(tmp_path: Path) -> None:
    ws = str(tmp_path)
    argv = build_argv(["true"], workspace=ws, allow_network=False, env={"FOO": "1 2", "LANG": "de_DE.UTF-8"})
    assert argv.index("--clearenv") < argv.index("--setenv")
    assert _pairs(argv, "--setenv", 2) == [("PATH", DEFAULT_PATH), ("HOME", ws), ("LANG", "de_DE.UTF-8"),
                                           ("FOO", "1 2")]


@pytest.mark.parametrize("key,value", [("", "x"), ("A=B", "x"), ("1X", "x"), ("OK", "nul\0byte"), ("-X", "x")])
def test_invalid_environment_is_refused(tmp_path: Path, key: str, value: str) -> None:
    with pytest.raises(SandboxError, match="environment"):
        build_argv(["true"], workspace=str(tmp_path), allow_network=False, env={key: value})


def test_flags_cover_the_boundary(tmp_path: Path) -> None:
    argv = build_argv(["true"], workspace=str(tmp_path), allow_network=False)
    head = argv[:argv.index("--")]
    for flag in ("--die-with-parent", "--new-session", "--clearenv", "--unshare-all"):
        assert head.count(flag) == 1
    assert _pairs(argv, "--cap-drop", 1) == [("ALL",)]
    assert _pairs(argv, "--dev", 1) == [("/dev",)] and _pairs(argv, "--proc", 1) == [("/proc",)]


def test_empty_command_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxError):
        build_argv([], workspace=str(tmp_path), allow_network=False)


def test_boundary_reports_what_the_argv_does(tmp_path: Path) -> None:
    b = bwrap_boundary(workspace=str(tmp_path), allow_network=False, version="0.8.0")
    assert (b.mode, b.read_only_root, b.writable, b.network, b.private_tmp, b.die_with_parent) == (
        SandboxMode.BWRAP, True, (os.path.realpath(tmp_path),), False, True, True)
    assert "no seccomp filter" in b.notes and any("network namespace unshared" in n for n in b.notes)
    assert bwrap_boundary(workspace=str(tmp_path), allow_network=True).network is True


def test_none_boundary_says_nothing_is_contained() -> None:
    b = NONE_BOUNDARY
    assert (b.mode, b.read_only_root, b.network, b.private_tmp, b.die_with_parent) == (
        SandboxMode.NONE, False, True, False, False)
    assert b.writable == ("/",) and "unsandboxed: explicit none mode" in b.notes


# bwrap's own messages (agent-runtime notes §3.2/§3.3), and exec errors for the binary itself
CLASSIFY_TABLE = [
    ("/nonexistent/bwrap: No such file or directory", 127, "not_installed"),
    ("", 127, "not_installed"),
    ("bwrap: setting up uid map: Permission denied", 1, "uid_map_refused"),
    ("bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user "
     "namespaces. See <https://deb.li/bubblewrap> or <file:///usr/share/doc/bubblewrap/README.Debian.gz>.", 1,
     "no_user_namespaces"),
    ("bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged "
     "user namespaces. On e.g. debian this can be enabled with 'sysctl kernel.unprivileged_userns_clone=1'.", 1,
     "no_user_namespaces"),
    ("bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded (ENOSPC)", 1,
     "no_user_namespaces"),
    ("bwrap: Creating new namespace failed: Operation not permitted", 1, "no_user_namespaces"),
    ("bwrap: Creating new namespace failed: Permission denied", 1, "no_user_namespaces"),
    ("bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted", 1, "no_user_namespaces"),
    ("bwrap: Failed to make / slave: Operation not permitted", 1, "mount_refused"),
    ("bwrap: Failed to make / slave: Permission denied", 1, "mount_refused"),
    ("bwrap: Can't mount proc on /newroot/proc: Operation not permitted", 1, "mount_refused"),
    ("bwrap: Can't find source path /x: No such file or directory", 1, "other"),
    ("bwrap: execvp true: No such file or directory", 1, "other"),
    ("bwrap: Can't mkdir /tmp/x: Read-only file system", 1, "other"),
    ("bwrap: Unknown option --disable-userns", 1, "other"),
    ("probe timed out after 10s", -1, "other"),
    ("/etc/passwd: Permission denied", 126, "other"),
]


@pytest.mark.parametrize("stderr,rc,kind", CLASSIFY_TABLE)
def test_classify(stderr: str, rc: int, kind: str) -> None:
    assert classify(stderr, rc) == kind
    assert classify("\n" + stderr.upper() + "\n", rc) == kind  # trimmed, case-insensitive


@pytest.mark.parametrize("value", ["bwrap", "none"])
def test_known_modes_parse(value: str) -> None:
    assert SandboxMode(value).value == value


@pytest.mark.parametrize("value", ["BWRAP", "None", "", " bwrap", "bwrap ", "sandbox_exec", "read_only",
                                   "workspace_write", "danger-full-access", None, True, 1])
def test_unknown_modes_fail_closed(value: object) -> None:
    with pytest.raises(SandboxError) as info:
        SandboxMode(value)
    assert "'bwrap'" in str(info.value) and "'none'" in str(info.value)
    assert not isinstance(info.value, SandboxUnavailable)


def test_run_with_an_unknown_mode_runs_nothing(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="unknown sandbox mode"):
        run(["touch", "ran"], mode="full-access", workspace=str(tmp_path))  # type: ignore[arg-type]
    assert not (tmp_path / "ran").exists()
