"""Run tool commands inside a bubblewrap sandbox, and say exactly which boundary applied.

"Sandboxed" is not a portable boolean: bwrap can be installed and still unusable (no user namespaces, an AppArmor
uid-map refusal, mounts blocked by seccomp), and the same flags mean different things as root and as a user. So:

* :func:`probe` runs bwrap **once with the exact flags real commands use** around ``true`` (cached per process by
  :func:`probe_cached`) and classifies a failure from bwrap's own message (:func:`classify`, a pure table);
* it **fails closed**: an unknown mode string is a :class:`SandboxError`; :attr:`SandboxMode.BWRAP` with a failed
  probe is :class:`SandboxUnavailable` naming the failure kind, never a silent unsandboxed run;
  :attr:`SandboxMode.NONE` runs unsandboxed only because the caller said so, and its boundary says so;
* every :class:`Result` carries the :class:`Boundary` that applied: read-only root, writable paths, network,
  private ``/tmp``, die-with-parent, backend version and plain notes ("no seccomp filter", ...).

The argv (:func:`build_argv`, pure): read-only ``/``, fresh ``/dev`` and ``/proc``, private tmpfs ``/tmp``, the
workspace bound writable, every namespace unshared (network shared back only when granted), **all capabilities
dropped** (run as root, bwrap otherwise leaves the command every capability in its user namespace: enough to
``mount -o remount,bind,rw /`` and write the host), die-with-parent, a new session, a cleared environment. The pid
namespace is unshared, so whatever the command leaves running dies with it; bwrap runs in its own process group
(``start_new_session``), so a timeout SIGKILLs the group and the namespace goes with bwrap. In ``none`` mode the
process group is the only cleanup: a process that calls ``setsid`` itself escapes (one more reason it is explicit).
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from ..core.errors import OuroactorsError

FailureKind = Literal["not_installed", "no_user_namespaces", "uid_map_refused", "mount_refused", "other"]

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEFAULT_LANG = "C.UTF-8"
OUTPUT_LIMIT = 1 << 20  # bytes kept per stream; the rest is drained and dropped
DRAIN_GRACE_S = 2.0  # after exit, how long to wait for pipes held by an escaped process
PROBE_TIMEOUT_S = 10.0
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class SandboxError(OuroactorsError):
    """A sandbox request that cannot be honoured as asked (bad mode, bad workspace, bad env)."""


class SandboxUnavailable(SandboxError):
    """The bwrap sandbox was asked for but does not work here; nothing was run."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"bwrap sandbox unavailable ({kind}): {detail or 'no detail'}; refusing to run unsandboxed")
        self.kind = kind
        self.detail = detail


class SandboxMode(str, Enum):
    BWRAP = "bwrap"
    NONE = "none"

    @classmethod
    def _missing_(cls, value: object) -> SandboxMode:
        allowed = ", ".join(repr(m.value) for m in cls)
        raise SandboxError(f"unknown sandbox mode {value!r}: allowed modes are {allowed}")


@dataclass(frozen=True)
class Boundary:
    """What actually contained one command."""

    mode: SandboxMode
    read_only_root: bool
    writable: tuple[str, ...]
    network: bool
    private_tmp: bool
    die_with_parent: bool
    backend_version: str | None
    notes: tuple[str, ...]
    read_only: tuple[str, ...] = ()  # extra read-only binds (e.g. protected paths inside the workspace)


@dataclass(frozen=True)
class Probe:
    available: bool
    mode: SandboxMode  # the backend that was probed
    failure: str | None = None
    failure_kind: FailureKind | None = None
    detail: str = ""  # bwrap's own stderr, trimmed
    version: str | None = None
    flags: tuple[str, ...] = ()  # the exact argv of the live probe
    path: str | None = None  # the bwrap binary used
    uid: int = -1


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    boundary: Boundary
    timed_out: bool
    duration_s: float
    argv: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def canonical_dir(path: str, what: str = "workspace") -> str:
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        raise SandboxError(f"{what} {path!r} is not an existing directory")
    if real == "/":
        raise SandboxError(f"{what} may not be / (the whole filesystem would be writable)")
    return real


def sandbox_env(workspace: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment a command sees: PATH, HOME=workspace, LANG, then ``env`` (which may override)."""
    merged = {"PATH": DEFAULT_PATH, "HOME": workspace, "LANG": DEFAULT_LANG}
    for key, value in (env or {}).items():
        if not _ENV_KEY.match(key) or "\0" in value:
            raise SandboxError(f"invalid environment entry {key!r}")
        merged[key] = value
    return merged


def build_argv(command: Sequence[str], *, workspace: str, allow_network: bool, extra_ro: tuple[str, ...] = (),
               env: Mapping[str, str] | None = None, bwrap: str = "bwrap") -> list[str]:
    """The bwrap argv for ``command``. Pure apart from canonicalising paths (which must exist)."""
    if not command:
        raise SandboxError("empty command")
    ws = canonical_dir(workspace)
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--bind", ws, ws]
    for path in extra_ro:  # after the workspace bind, so a path inside the workspace can be made read-only
        real = os.path.realpath(path)
        if not os.path.exists(real):  # binding over a missing path would create it on the host
            raise SandboxError(f"read-only path {path!r} does not exist")
        argv += ["--ro-bind", real, real]
    argv += ["--unshare-all"] + (["--share-net"] if allow_network else [])
    argv += ["--cap-drop", "ALL", "--die-with-parent", "--new-session", "--chdir", ws, "--clearenv"]
    for key, value in sandbox_env(ws, env).items():
        argv += ["--setenv", key, value]
    return [*argv, "--", *command]


def bwrap_boundary(*, workspace: str, allow_network: bool, extra_ro: tuple[str, ...] = (),
                   version: str | None = None, env_keys: int = 0) -> Boundary:
    ws = canonical_dir(workspace)
    notes = [
        "namespaces unshared: mount, pid, ipc, uts, user and cgroup where permitted",
        "network shared with the host (granted)" if allow_network
        else "network namespace unshared: loopback only, no route out",
        "all capabilities dropped (--cap-drop ALL), no_new_privs",
        "no seccomp filter",
        "new session: no controlling terminal",
        f"environment cleared: PATH, HOME, LANG and {env_keys} given",
        "processes left running die with the command's pid namespace",
        "die-with-parent is racy while bwrap starts (bubblewrap#633): a runtime killed then can orphan it",
    ]
    if ws == "/tmp":
        notes.append("workspace is /tmp: the host /tmp is visible and writable")
    return Boundary(mode=SandboxMode.BWRAP, read_only_root=True, writable=(ws,), network=allow_network,
                    private_tmp=ws != "/tmp", die_with_parent=True, backend_version=version, notes=tuple(notes),
                    read_only=tuple(os.path.realpath(p) for p in extra_ro))


NONE_BOUNDARY = Boundary(
    mode=SandboxMode.NONE, read_only_root=False, writable=("/",), network=True, private_tmp=False,
    die_with_parent=False, backend_version=None,
    notes=("unsandboxed: explicit none mode", "writes limited only by the host uid's permissions",
           "cleanup by process group only: a process that calls setsid escapes"))


# First match wins; patterns are matched against bwrap's stderr, lower-cased.
_CLASSIFY: tuple[tuple[str, FailureKind], ...] = (
    (r"setting up uid map|uid_?map", "uid_map_refused"),
    (r"no permissions to creat(e|ing) new namespace|user namespaces|creating new namespace failed"
     r"|max_\S*_namespaces|nesting depth", "no_user_namespaces"),
    # userns created but capabilities stripped (Ubuntu AppArmor): the namespace is not usable
    (r"loopback: failed rtm_newaddr", "no_user_namespaces"),
    (r"failed to make / slave|can't mount|mount.*(permission denied|operation not permitted)", "mount_refused"),
)


def classify(stderr: str, returncode: int) -> FailureKind:
    """Name a failed probe from bwrap's own message (or the exec error for the binary itself)."""
    text = stderr.strip().lower()
    if returncode == 127 or (not text.startswith("bwrap:") and "no such file or directory" in text):
        return "not_installed"
    for pattern, kind in _CLASSIFY:
        if re.search(pattern, text):
            return kind
    return "other"


# kind -> (what failed, what to do about it)
_KINDS: dict[str, tuple[str, str]] = {
    "not_installed": ("bwrap is not installed (or not at the given path)",
                      "install it (Debian/Ubuntu: apt-get install bubblewrap)"),
    "no_user_namespaces": ("bwrap could not create the namespaces it needs",
                           "the kernel or container forbids user namespaces (sysctl, seccomp profile, or nesting)"),
    "uid_map_refused": ("bwrap's user namespace uid map was refused (AppArmor or policy)",
                        "on Ubuntu 24.04 install the bwrap-userns-restrict AppArmor profile; do not disable the "
                        "global restriction"),
    "mount_refused": ("bwrap could not set up its mounts", "the container's seccomp/AppArmor profile blocks mount(2)"),
    "other": ("bwrap failed", "see bwrap's message above"),
}


def probe(bwrap_path: str | None = None) -> Probe:
    """Run bwrap once, with the flags real commands use, around ``true``; then read its version."""
    path = bwrap_path if bwrap_path is not None else shutil.which("bwrap")
    uid = os.getuid()
    if path is None:
        return Probe(False, SandboxMode.BWRAP, _KINDS["not_installed"][0], "not_installed",
                     "bwrap not found on PATH", uid=uid)
    scratch = tempfile.mkdtemp(prefix="ouroactors-probe-")
    argv: list[str] = []
    try:
        argv = build_argv(["true"], workspace=scratch, allow_network=False, bwrap=path)
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env={},
                                  timeout=PROBE_TIMEOUT_S)
            rc, err = done.returncode, done.stderr.decode(errors="replace")
        except subprocess.TimeoutExpired:
            rc, err = -1, f"probe timed out after {PROBE_TIMEOUT_S:g}s"
        except OSError as exc:
            rc, err = (127 if isinstance(exc, FileNotFoundError) else 126), f"{path}: {exc.strerror or exc}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    detail = err.strip()[-2000:]
    if rc != 0:
        kind = classify(err, rc)
        return Probe(False, SandboxMode.BWRAP, _KINDS[kind][0], kind, detail, flags=tuple(argv), path=path, uid=uid)
    return Probe(True, SandboxMode.BWRAP, None, None, detail, _version(path), tuple(argv), path, uid)


def _version(path: str) -> str | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, timeout=PROBE_TIMEOUT_S, text=True).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.split()[-1] if out.split() else None


_cache: dict[str | None, Probe] = {}
_cache_lock = threading.Lock()


def probe_cached(bwrap_path: str | None = None) -> Probe:
    """:func:`probe`, once per process and path. :func:`clear_probe_cache` re-probes after a policy change."""
    with _cache_lock:
        if bwrap_path not in _cache:
            _cache[bwrap_path] = probe(bwrap_path)
        return _cache[bwrap_path]


def clear_probe_cache() -> None:
    with _cache_lock:
        _cache.clear()


def describe(p: Probe) -> str:
    """A human summary for ``ouroactors sandbox check``."""
    if p.available:
        lines = [f"bwrap: available (bubblewrap {p.version or '?'} at {p.path}, probed as uid {p.uid})",
                 "boundary: read-only root; writable: the workspace only; private /tmp; no network unless granted; "
                 "all capabilities dropped; die-with-parent; new session; cleared environment; no seccomp filter"]
    else:
        lines = [f"bwrap: UNAVAILABLE — {p.failure_kind}: {p.failure}"]
        if p.detail:
            lines.append(f"bwrap said: {p.detail}")
        lines += [f"hint: {_KINDS[p.failure_kind or 'other'][1]}",
                  "commands asking for the bwrap sandbox are refused; mode 'none' runs them unsandboxed and must "
                  "be chosen explicitly"]
    if p.flags:
        lines.append("probe: " + " ".join(p.flags))
    return "\n".join(lines)


def run(command: Sequence[str], *, mode: SandboxMode, workspace: str, allow_network: bool = False,
        timeout: float = 60, env: Mapping[str, str] | None = None, probe: Probe | None = None,
        extra_ro: tuple[str, ...] = (), output_limit: int = OUTPUT_LIMIT) -> Result:
    """Run ``command`` under ``mode``; the result carries the boundary that applied."""
    mode = SandboxMode(mode)  # fail closed on strings that are not a mode
    if not command or not timeout > 0:
        raise SandboxError(f"need a command and a positive timeout (got {list(command)!r}, {timeout!r})")
    ws = canonical_dir(workspace)
    if mode is SandboxMode.BWRAP:
        found = probe if probe is not None else probe_cached()
        if not found.available or found.path is None:
            raise SandboxUnavailable(found.failure_kind or "other", found.detail)
        argv = build_argv(command, workspace=ws, allow_network=allow_network, extra_ro=extra_ro, env=env,
                          bwrap=found.path)
        boundary = bwrap_boundary(workspace=ws, allow_network=allow_network, extra_ro=extra_ro,
                                  version=found.version, env_keys=len(env or {}))
        child_env: dict[str, str] | None = {}  # bwrap sets the command's environment itself
    else:
        argv, boundary, child_env = list(command), NONE_BOUNDARY, sandbox_env(ws, env)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=ws, env=child_env, start_new_session=True, close_fds=True)
    except OSError as exc:
        if mode is SandboxMode.BWRAP:
            raise SandboxUnavailable("not_installed", f"{argv[0]}: {exc}") from exc
        raise SandboxError(f"could not start {command[0]!r}: {exc}") from exc
    out, err, timed_out, notes = _supervise(proc, timeout, output_limit)
    return Result(proc.returncode, bytes(out.data), bytes(err.data), out.truncated, err.truncated, boundary,
                  timed_out, time.monotonic() - started, tuple(argv), tuple(notes))


class _Capture:
    def __init__(self, limit: int) -> None:
        self.data, self.limit, self.truncated = bytearray(), limit, False

    def add(self, chunk: bytes) -> None:
        room = max(self.limit - len(self.data), 0)
        self.truncated |= len(chunk) > room
        self.data += chunk[:room]


def _killpg(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _exited(pid: int) -> bool:
    """Has ``pid`` exited? Does not reap, so its (zombie) pid still pins the process group id."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None and info.si_pid == pid


def _supervise(proc: subprocess.Popen[bytes], timeout: float,
               limit: int) -> tuple[_Capture, _Capture, bool, list[str]]:
    """Read both pipes until the command ends; SIGKILL its process group on exit (stragglers) or timeout."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Capture(limit), _Capture(limit)
    sel = selectors.DefaultSelector()
    pidfd = -1
    notes: list[str] = []
    try:
        for stream, capture in ((proc.stdout, out), (proc.stderr, err)):
            os.set_blocking(stream.fileno(), False)
            sel.register(stream.fileno(), selectors.EVENT_READ, capture)
        with contextlib.suppress(AttributeError, OSError):
            pidfd = os.pidfd_open(proc.pid)  # readable when the process exits; we then still poll to be sure
            sel.register(pidfd, selectors.EVENT_READ, None)
        deadline = time.monotonic() + timeout
        swept_at: float | None = None
        timed_out = False
        while True:
            now = time.monotonic()
            if swept_at is None and _exited(proc.pid):
                _killpg(proc.pid)  # the leader's zombie still holds the group id: no reuse race
                swept_at = now
            elif swept_at is None and now >= deadline:
                timed_out = True
                _killpg(proc.pid)
                swept_at = now
            pipes_open = any(k.data is not None for k in sel.get_map().values())
            if swept_at is not None and not pipes_open and _exited(proc.pid):
                break
            if swept_at is not None and now >= swept_at + DRAIN_GRACE_S:
                notes.append("output pipes still held open after the command ended; stopped reading")
                break
            wait = 0.05 if swept_at is not None else min(0.05 if pidfd < 0 else 1.0, max(deadline - now, 0.0))
            for key, _ in sel.select(wait):
                if key.data is None:  # pidfd became readable: exit is noticed at the top of the loop
                    sel.unregister(key.fd)
                    continue
                chunk = os.read(key.fd, 65536)
                if chunk:
                    key.data.add(chunk)
                else:
                    sel.unregister(key.fd)
        proc.wait()
        return out, err, timed_out, notes
    finally:
        sel.close()
        if pidfd >= 0:
            os.close(pidfd)
        if proc.returncode is None:  # an exception escaped the loop: never leave the command behind
            _killpg(proc.pid)
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
