"""Pure parts: the argv, the failure classification table, mode parsing (fails closed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ouroactors.runtime.sandbox import (
    BRIDGE_SOURCE,
    DEFAULT_LANG,
    DEFAULT_PATH,
    NONE_BOUNDARY,
    PROXY_DIR,
    PROXY_ENV_KEYS,
    PROXY_PORT,
    SandboxError,
    SandboxMode,
    SandboxUnavailable,
    build_argv,
    bwrap_boundary,
    classify,
    run,
)
from ouroactors.runtime.sandbox_fs import ViewEntry


def _pairs(argv: list[str], flag: str, arity: int) -> list[tuple[str, ...]]:
    return [tuple(argv[i + 1:i + 1 + arity]) for i, a in enumerate(argv[:argv.index("--")]) if a == flag]


VIEW = (ViewEntry("/usr", "bind"), ViewEntry("/bin", "symlink", "usr/bin"), ViewEntry("/etc/passwd", "bind"))


def test_full_argv_without_network(tmp_path: Path) -> None:
    ws = str(tmp_path)
    assert build_argv(["sh", "-c", "echo hi"], workspace=ws, allow_network=False, view=VIEW) == [
        "bwrap", "--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--new-session",
        "--ro-bind", "/usr", "/usr", "--dir", "/", "--symlink", "usr/bin", "/bin", "--ro-bind", "/etc/passwd",
        "/etc/passwd", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--dir", "/run", "--bind", ws, ws,
        "--remount-ro", "/", "--chdir", ws, "--clearenv",
        "--setenv", "PATH", DEFAULT_PATH, "--setenv", "HOME", ws, "--setenv", "LANG", DEFAULT_LANG,
        "--", "sh", "-c", "echo hi"]


def test_network_is_never_shared_only_proxied(tmp_path: Path) -> None:
    (tmp_path / "proxy").mkdir()
    closed = build_argv(["true"], workspace=str(tmp_path), allow_network=False, view=VIEW)
    opened = build_argv(["curl", "x"], workspace=str(tmp_path), allow_network=True, view=VIEW,
                        proxy_dir=str(tmp_path / "proxy"), python="/opt/py/bin/python3")
    for argv in (closed, opened):
        assert "--share-net" not in argv and argv.count("--unshare-all") == 1
    assert _pairs(opened, "--ro-bind", 2)[-1] == (str(tmp_path / "proxy"), PROXY_DIR)
    env = dict(_pairs(opened, "--setenv", 2))
    for key in PROXY_ENV_KEYS:
        assert env[key] == f"http://127.0.0.1:{PROXY_PORT}"
    tail = opened[opened.index("--") + 1:]
    assert tail[:5] == ["/opt/py/bin/python3", "-I", "-S", "-c", BRIDGE_SOURCE]
    assert tail[5:] == [f"{PROXY_DIR}/proxy.sock", str(PROXY_PORT), "--", "curl", "x"]
    with pytest.raises(SandboxError, match="proxy"):
        build_argv(["true"], workspace=str(tmp_path), allow_network=True, view=VIEW)


def test_the_root_is_remounted_read_only_after_every_mount(tmp_path: Path) -> None:
    argv = build_argv(["true"], workspace=str(tmp_path), allow_network=False, view=VIEW,
                      extra_ro=(str(tmp_path),))
    head = argv[:argv.index("--")]
    last_mount = max(i for i, a in enumerate(head) if a in ("--bind", "--ro-bind", "--tmpfs", "--symlink", "--dir"))
    assert head.index("--remount-ro") > last_mount and _pairs(argv, "--remount-ro", 1) == [("/",)]


def test_view_never_binds_the_whole_root_or_secrets(tmp_path: Path) -> None:
    argv = build_argv(["true"], workspace=str(tmp_path), allow_network=False)  # this host's real view
    binds = {src for src, _ in _pairs(argv, "--ro-bind", 2)} | {src for src, _ in _pairs(argv, "--bind", 2)}
    assert "/" not in binds and "/etc" not in binds
    for secret in ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh", "/etc/ssl/private", "/root", "/home",
                   "/run", "/var", "/tmp"):
        assert secret not in binds


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
    argv = build_argv(["true"], workspace=str(tmp_path), allow_network=False, extra_ro=(str(tmp_path / "ln"),),
                      view=VIEW)
    git = str(tmp_path / ".git")
    assert _pairs(argv, "--ro-bind", 2) == [("/usr", "/usr"), ("/etc/passwd", "/etc/passwd"), (git, git)]
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
