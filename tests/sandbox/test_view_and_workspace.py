"""The read-only view (an allow-list built from this host) and the workspace rules (pure)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.runtime.sandbox_fs import (
    ETC_ALLOWED,
    SYSTEM_DIRS,
    ViewEntry,
    WorkspaceRefused,
    check_workspace,
    system_view,
    toolchain,
    under,
    view_args,
)

HOMES = ("/home/alice", "/home/bob", "/root", "/var/lib/postgresql", "/usr/sbin")


def ok(ws: str, *, home: str | None = "/home/alice", data_dir: str | None = "/srv/ouro/data",
       leased_root: str | None = None) -> None:
    check_workspace(ws, data_dir=data_dir, homes=HOMES, home=home, leased_root=leased_root,
                    leased_root_real=leased_root)


@pytest.mark.parametrize("ws", ["/home/alice/proj", "/home/alice/a/b", "/tmp/x", "/tmp/pytest-of-root/t/ws",
                                "/var/tmp/build", "/srv/projects/app", "/opt/work/x", "/work/main", "/data/repo",
                                "/srv/ouro/other"])
def test_project_directories_are_accepted(ws: str) -> None:
    ok(ws)


@pytest.mark.parametrize("ws,why", [
    ("/", "whole filesystem"), ("/etc", "system directory /etc"), ("/etc/ssh", "system directory /etc"),
    ("/proc", "/proc"), ("/proc/1/root", "/proc"), ("/sys", "/sys"), ("/dev", "/dev"), ("/usr", "/usr"),
    ("/usr/local/src", "/usr"), ("/bin", "/bin"), ("/boot", "/boot"), ("/run", "/run"), ("/run/user/0", "/run"),
    ("/var", "/var"), ("/var/lib/docker", "/var"), ("/var/run", "/var"), ("/lib64", "/lib64"),
    ("/home", "shared top-level"), ("/tmp", "shared top-level"), ("/var/tmp", "shared top-level"),
    ("/srv", "overlaps the data dir"), ("/opt", "shared top-level"), ("/home/alice", "the caller's home directory"),
    ("/home/bob", "another user's home"), ("/home/bob/proj", "another user's home"),
    ("/root", "another user's home"), ("/root/proj", "another user's home"),
    ("/var/lib/postgresql/data", "another user's home"),
    ("/srv/ouro/data", "overlaps the data dir"), ("/srv/ouro/data/lmdb", "overlaps the data dir"),
    ("/srv/ouro", "overlaps the data dir"),
])
def test_system_state_and_others_homes_are_refused(ws: str, why: str) -> None:
    with pytest.raises(WorkspaceRefused, match=why) as info:
        ok(ws)
    assert info.value.path == ws and repr(ws) in str(info.value)


def test_root_may_work_under_its_own_home() -> None:
    ok("/root/proj", home="/root")
    with pytest.raises(WorkspaceRefused, match="caller's home"):
        ok("/root", home="/root")
    with pytest.raises(WorkspaceRefused, match="another user's home"):
        ok("/home/alice/x", home="/root")


def test_a_parent_of_a_home_is_refused() -> None:
    homes = ("/work/users/alice",)
    with pytest.raises(WorkspaceRefused, match="contains the home directory"):
        check_workspace("/work/users", data_dir=None, homes=homes, home=None, leased_root=None)


def test_the_workspace_must_be_the_leased_root_or_inside_it() -> None:
    ok("/srv/projects/app", leased_root="/srv/projects/app")
    ok("/srv/projects/app/pkg", leased_root="/srv/projects/app")
    for ws in ("/srv/projects", "/srv/projects/app2", "/srv/projects/other"):
        with pytest.raises(WorkspaceRefused, match="not the leased root"):
            ok(ws, leased_root="/srv/projects/app")
    with pytest.raises(WorkspaceRefused, match="not canonical"):
        check_workspace("/srv/real/app", data_dir=None, homes=(), home=None, leased_root="/srv/link/app",
                        leased_root_real="/srv/real/app")
    with pytest.raises(WorkspaceRefused, match="system directory /etc"):  # a lease on /etc does not make it one
        ok("/etc", leased_root="/etc")


PARTS = ["etc", "usr", "home", "alice", "bob", "tmp", "var", "run", "srv", "ouro", "data", "proj", "root", "proc", "x"]
PATHS = st.lists(st.sampled_from(PARTS), min_size=0, max_size=4).map(lambda p: "/" + "/".join(p))


@given(PATHS)
def test_an_accepted_workspace_never_overlaps_state_or_system_directories(ws: str) -> None:
    try:
        ok(ws)
    except WorkspaceRefused:
        return
    assert not under(ws, "/srv/ouro/data") and not under("/srv/ouro/data", ws)
    for system in SYSTEM_DIRS:
        assert not under(ws, system) or under(ws, "/var/tmp")
    for home in HOMES:
        assert home == "/home/alice" or (not under(ws, home) and not under(home, ws))
    assert ws not in ("/", "/home/alice")


def test_under_respects_path_boundaries() -> None:
    assert under("/a/b", "/a") and under("/a", "/a") and under("/x", "/")
    assert not under("/ab", "/a") and not under("/a", "/a/b")


# --- the view ---------------------------------------------------------------------------------------------

def test_host_view_is_the_allow_list_only() -> None:
    view = system_view()
    paths = {e.path for e in view}
    assert "/usr" in paths and "/" not in paths and "/etc" not in paths
    for secret in ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh", "/etc/ssl/private", "/etc/ssl",
                   "/home", "/root", "/run", "/var", "/tmp"):
        assert secret not in paths
    for entry in view:
        if entry.path.startswith("/etc/"):
            assert entry.path[5:] in ETC_ALLOWED
            if entry.kind == "bind":
                mode = os.stat(entry.path).st_mode
                assert mode & stat.S_IROTH, entry  # only what every local user may read
    for top in ("/bin", "/sbin", "/lib", "/lib64"):
        if os.path.islink(top):
            assert ViewEntry(top, "symlink", os.readlink(top)) in view  # usrmerge: the same link inside
        elif os.path.isdir(top):
            assert ViewEntry(top, "bind") in view
    for prefix in toolchain():
        assert any(under(prefix, e.path) for e in view if e.kind == "bind")


def test_unreadable_etc_entries_are_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ouroactors.runtime import sandbox_fs

    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "open.conf").write_text("x")
    (etc / "secret.conf").write_text("x")
    (etc / "secret.conf").chmod(0o600)
    (etc / "closed.d").mkdir(mode=0o700)
    (etc / "link").symlink_to("/usr/share/zoneinfo/UTC")
    monkeypatch.setattr(sandbox_fs, "ETC_ALLOWED", ("open.conf", "secret.conf", "closed.d", "link", "missing"))
    monkeypatch.setattr(sandbox_fs, "SYSTEM_TOP", ())
    original = sandbox_fs._entry
    monkeypatch.setattr(sandbox_fs, "_entry", lambda p, **kw: original(p.replace("/etc/", f"{etc}/"), **kw))
    found = {(e.path, e.kind, e.target) for e in sandbox_fs.system_view()}
    assert (f"{etc}/open.conf", "bind", "") in found
    assert (f"{etc}/link", "symlink", "/usr/share/zoneinfo/UTC") in found
    assert not any("secret" in p or "closed" in p or "missing" in p for p, _, _ in found)


def test_view_args() -> None:
    assert view_args([ViewEntry("/usr", "bind"), ViewEntry("/lib64", "symlink", "usr/lib64"),
                      ViewEntry("/etc/localtime", "symlink", "/usr/share/zoneinfo/UTC")]) == [
        "--ro-bind", "/usr", "/usr", "--dir", "/", "--symlink", "usr/lib64", "/lib64",
        "--dir", "/etc", "--symlink", "/usr/share/zoneinfo/UTC", "/etc/localtime"]
