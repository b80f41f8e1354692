"""What a sandboxed command may see and write: the read-only allow-list and the workspace rules.

**The view is an allow-list, not ``/`` minus secrets.** The sandbox root is an empty tmpfs, remounted
read-only at the end; into it go, read-only, ``/usr`` and whichever of ``/bin /sbin /lib /lib32 /lib64
/libx32`` exist (a usrmerge symlink such as ``/bin -> usr/bin`` is recreated as the same symlink, a real
directory is bound), the toolchain (the running Python's prefixes when they live outside ``/usr``), and an
allow-listed set of ``/etc`` entries. Nothing else of the host exists inside: not the data dir, not
``/home``, ``/root``, ``/run`` (so no host UNIX socket such as ``/run/*.sock``; the abstract socket
namespace belongs to the network namespace, which is always unshared), ``/var`` or the host's ``/tmp``.

**Why an allow-list for /etc** and not a bind of ``/etc`` with the secrets overlaid: a deny-list only hides
the secrets someone thought of (``shadow`` and ``sudoers`` yes; ``mysql/debian.cnf``, ``krb5.keytab``,
``ssl/private``, a NetworkManager password, a tool's token in ``/etc/<tool>/`` no). The entries here are the
ones programs need to run (name service, dynamic loader, certificates, time zone, locale, shells, the
Debian alternatives). An entry is bound only if it is readable by every local user (mode o+r, and o+x for a
directory): the command then sees no more of ``/etc`` than any local account does. This matters because a
command started by root is root in its user namespace: dropping every capability removes
``CAP_DAC_OVERRIDE`` but not the owner's own rights on root's 0600 files. A symlink is recreated as the same
symlink (``/etc/localtime``, ``/etc/mtab``) rather than followed at bind time.

**The workspace** (writable) must be an existing directory, canonical, and neither a system directory (nor
inside one), the data dir, another user's home, the caller's home itself, nor any directory that *contains*
one of those (``/``, ``/home``, a parent of the data dir). When the caller passes the lease's canonical root
the workspace must be that root or lie under it, and the root must already be canonical.
"""

from __future__ import annotations

import os
import pwd
import stat
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..core.errors import OuroactorsError

SYSTEM_TOP = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ALLOWED = (
    "passwd", "group", "hosts", "hostname", "host.conf", "nsswitch.conf", "resolv.conf", "gai.conf", "services",
    "protocols", "networks", "rpc", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
    "os-release", "debian_version", "lsb-release", "mime.types", "magic", "magic.mime", "locale.alias",
    "locale.gen", "locale.conf", "environment", "profile", "profile.d", "bash.bashrc", "inputrc", "shells",
    "alternatives", "ca-certificates", "ca-certificates.conf", "ssl/certs", "ssl/openssl.cnf", "pki/tls/certs",
    "gitconfig", "wgetrc", "terminfo", "python3", "mtab", "xdg", "fonts",
)
# never a workspace, nor inside one: the host's own system and state (/root only as someone else's home)
SYSTEM_DIRS = ("/etc", "/proc", "/sys", "/dev", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
               "/boot", "/run", "/var", "/root", "/snap", "/lost+found")
# shared top-level directories: never a workspace themselves, though a project directory below them may be
SHARED_TOPS = ("/home", "/tmp", "/var/tmp", "/srv", "/opt", "/mnt", "/media")
SCRATCH_PARENTS = ("/tmp", "/var/tmp")


class SandboxError(OuroactorsError):
    """A sandbox request that cannot be honoured as asked (bad mode, bad workspace, bad env)."""


class WorkspaceRefused(SandboxError, ValueError):
    """The directory asked for as a writable workspace may not be one; nothing was run."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"workspace {path!r} refused: {reason}")
        self.path, self.reason = path, reason

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.path, self.reason))


@dataclass(frozen=True)
class ViewEntry:
    """One host path in the read-only view: bound as is, or recreated as a symlink with the same target."""

    path: str
    kind: Literal["bind", "symlink"]
    target: str = ""  # the symlink's text, for kind="symlink"


def under(path: str, root: str) -> bool:
    """``path`` equals ``root`` or lies below it, on ``/`` boundaries (both canonical)."""
    return path == root or root == "/" or path.startswith(root.rstrip("/") + "/")


def _entry(path: str, *, world_readable: bool) -> ViewEntry | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return ViewEntry(path, "symlink", os.readlink(path))
    if world_readable:
        need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(st.st_mode) else 0)
        if st.st_mode & need != need:
            return None
    return ViewEntry(path, "bind")


def system_view(extra: Iterable[str] = ()) -> tuple[ViewEntry, ...]:
    """The host paths a sandboxed command sees read-only (reads the host's file modes; see the module doc)."""
    entries = [e for top in SYSTEM_TOP if (e := _entry(top, world_readable=False)) is not None]
    entries += [e for name in ETC_ALLOWED if (e := _entry(f"/etc/{name}", world_readable=True)) is not None]
    seen = {e.path for e in entries}
    for prefix in [*toolchain(), *extra]:
        real = os.path.realpath(prefix)
        if real not in seen and not any(under(real, e.path) for e in entries if e.kind == "bind"):
            entries.append(ViewEntry(real, "bind"))
            seen.add(real)
    return tuple(entries)


def toolchain() -> tuple[str, ...]:
    """The running Python's prefixes that lie outside ``/usr`` (a pyenv or venv install), canonical."""
    found: list[str] = []
    for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        real = os.path.realpath(prefix)
        if real != "/" and not under(real, "/usr") and real not in found and os.path.isdir(real):
            found.append(real)
    return tuple(found)


def view_args(entries: Sequence[ViewEntry]) -> list[str]:
    """bwrap arguments for the view (pure): parents of symlinks are created first, binds are read-only."""
    args: list[str] = []
    for e in entries:
        if e.kind == "symlink":
            args += ["--dir", os.path.dirname(e.path) or "/", "--symlink", e.target, e.path]
        else:
            args += ["--ro-bind", e.path, e.path]
    return args


HOMES_TTL_S = 2.0  # how long the resolved home directories are reused while the account database is unchanged
_homes_cache: tuple[tuple[object, float], tuple[tuple[str, ...], str | None]] | None = None


def _accounts_stamp() -> object:
    try:
        st = os.stat("/etc/passwd")
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size, os.getuid())


def _homes() -> tuple[tuple[str, ...], str | None]:
    """(every account's canonical home, the caller's), resolved again when ``/etc/passwd`` changes and at least
    every :data:`HOMES_TTL_S` seconds. Resolving them costs a ``realpath`` per account (about 0.2 ms for a small
    system's 20 accounts), which every tool run paid; a home moved without touching the account database is seen
    within the TTL."""
    global _homes_cache
    stamp, now = _accounts_stamp(), time.monotonic()
    cached = _homes_cache
    if cached is not None and cached[0][0] == stamp and stamp is not None and now - cached[0][1] < HOMES_TTL_S:
        return cached[1]
    homes = {os.path.realpath(p.pw_dir) for p in pwd.getpwall() if p.pw_dir and p.pw_dir not in ("/", "")}
    try:
        own: str | None = os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        own = None
    value = (tuple(sorted(h for h in homes if h != "/" and os.path.isdir(h))), own)
    _homes_cache = ((stamp, now), value)
    return value


def home_dirs() -> tuple[str, ...]:
    """Every account's home directory that is a real place (not ``/``, not ``/nonexistent``), canonical."""
    return _homes()[0]


def own_home() -> str | None:
    return _homes()[1]


def check_workspace(ws: str, *, data_dir: str | None, homes: Sequence[str], home: str | None,
                    leased_root: str | None, leased_root_real: str | None = None) -> None:
    """Refuse a writable workspace that is not a leased, ordinary project directory (pure: paths canonical).

    ``ws`` is already canonical. ``leased_root`` is what the caller says the lease covers, and
    ``leased_root_real`` its resolution on disk (they must agree: a lease is on a canonical root).
    """
    if ws == "/":
        raise WorkspaceRefused(ws, "/ would make the whole filesystem writable")
    if leased_root is not None:
        if leased_root_real != leased_root:
            raise WorkspaceRefused(ws, f"the leased root {leased_root!r} is not canonical "
                                       f"(it resolves to {leased_root_real!r})")
        if not under(ws, leased_root):
            raise WorkspaceRefused(ws, f"it is not the leased root {leased_root!r} nor inside it")
    if data_dir is not None and (under(ws, data_dir) or under(data_dir, ws)):
        raise WorkspaceRefused(ws, f"it overlaps the data dir {data_dir!r}")
    if ws in SHARED_TOPS:
        raise WorkspaceRefused(ws, "a shared top-level directory (use a project directory below it)")
    for home_dir in homes:
        if home_dir == home and ws != home and under(ws, home):
            continue  # a project inside the caller's own home
        if under(ws, home_dir):
            what = "the caller's home directory" if home_dir == home else "another user's home directory"
            raise WorkspaceRefused(ws, f"it is {what} ({home_dir}) or inside it")
        if under(home_dir, ws):
            raise WorkspaceRefused(ws, f"it contains the home directory {home_dir}")
    if (home is not None and under(ws, home)) or any(under(ws, scratch) for scratch in SCRATCH_PARENTS):
        return  # a project in the caller's own home, or a scratch directory (/tmp/x, /var/tmp/x)
    for system in SYSTEM_DIRS:
        if under(ws, system):
            raise WorkspaceRefused(ws, f"it is the system directory {system} or inside it")


def canonical_dir(path: str, what: str = "workspace") -> str:
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        raise WorkspaceRefused(path, f"the {what} is not an existing directory")
    if real == "/":
        raise WorkspaceRefused(path, f"the {what} may not be / (the whole filesystem would be writable)")
    return real


def check_run_paths(workspace: str, *, leased_root: str | None, data_dir: str | None,
                    extra_ro: tuple[str, ...]) -> str:
    """The canonical workspace, after refusing what may not be one (see :func:`check_workspace`)."""
    ws = canonical_dir(workspace)
    data = os.path.realpath(data_dir) if data_dir is not None else None
    # The lease root is most often the workspace itself (the shell tool's every run): the same path, so the same
    # resolution on disk as the workspace's, made once.
    lease_real = None if leased_root is None else ws if leased_root == workspace else os.path.realpath(leased_root)
    homes, home = _homes()  # one look at the account database for both
    check_workspace(ws, data_dir=data, homes=homes, home=home, leased_root=leased_root, leased_root_real=lease_real)
    for path in extra_ro:
        real = os.path.realpath(path)
        if real == "/" or (data is not None and (under(real, data) or under(data, real))):
            raise SandboxError(f"read-only path {path!r} may not be / or overlap the data dir {data_dir!r}")
    return ws
