"""Run tool commands inside a bubblewrap sandbox, and say exactly which boundary applied.

"Sandboxed" is not a portable boolean: bwrap can be installed and still unusable (no user namespaces, an AppArmor
uid-map refusal, mounts blocked by seccomp), and the same flags mean different things as root and as a user. So:

* :func:`probe` runs bwrap **once with the exact flags real commands use** around a shell that reports its pid and
  its namespaces (cached per process by :func:`probe_cached`): available only if isolation is proven — a pid
  namespace of its own in which it is pid 1 or 2, and mount, network, ipc and uts namespaces that are not this
  process's (:func:`isolation_failure`); a binary that exits 0 without isolating (``--bwrap /bin/true``, a wrapper
  that just runs its command) is ``not_isolating``. A failure is classified from bwrap's own message
  (:func:`classify`, a pure table);
* it **fails closed**: an unknown mode string is a :class:`SandboxError`; :attr:`SandboxMode.BWRAP` with a failed
  probe is :class:`SandboxUnavailable` naming the failure kind, never a silent unsandboxed run;
  :attr:`SandboxMode.NONE` runs unsandboxed only because the caller said so, and its boundary says so;
* every :class:`Result` carries the :class:`Boundary` that applied: the read-only view, writable paths, the
  network (``none``, ``proxy(domains…)`` or, unsandboxed, ``host``), private ``/tmp``, die-with-parent, backend
  version and plain notes ("no seccomp filter", ...); ``Result.network_refusals`` lists what the proxy refused.

The argv (:func:`build_argv`, pure given the view; it and the boundary live in :mod:`.sandbox_argv`): an empty root
(a tmpfs remounted read-only) holding only the allow-listed read-only view of :mod:`.sandbox_fs` (``/usr``, the
``/bin``/``/lib*`` links or dirs, allow-listed ``/etc`` entries, the toolchain, ``extra_ro``), fresh ``/dev`` and
``/proc``, a private tmpfs ``/tmp``, the workspace bound writable; every namespace unshared **including the network,
always**; **all capabilities dropped** (run as root, bwrap otherwise leaves the command every capability in its user
namespace: enough to remount and write the host), die-with-parent, a new session, a cleared environment. The pid
namespace is unshared, so whatever the command leaves running dies with it; bwrap runs in its own process group, so
a timeout SIGKILLs the group and the namespace goes with bwrap. In ``none`` mode the process group is killed at
the command's end, and so is what left it for a session of its own (``setsid``), found by the command's mark in its
environment (:func:`ouroactors.core.procs.end_command_leftovers`): nothing the command started outlives it, as
under bwrap; a process that also clears its environment escapes (one more reason the mode is explicit).

**Network, when granted** (``allow_network=True`` means ``NetworkPolicy(("*",))``: any public host; ``network=``
gives the grant's domains and the private destinations a rule names): the runtime starts a :class:`.NetProxy` on
a UNIX socket in a private directory, bound read-only at ``/run/ouroactors-proxy`` inside; the command is
started by the in-sandbox bridge (:mod:`.sandbox_bridge`, run with this Python), which listens on
``127.0.0.1:3128`` of the sandbox's own loopback and forwards to that socket; ``http_proxy``, ``https_proxy``,
``all_proxy`` (and upper-case forms) point there. The host's loopback, its actor ports and every other host
address are in another network namespace: the only way out is the proxy, which enforces the domains and refuses
loopback, link-local, private and reserved addresses unless a private rule names them.

**The contract of** :func:`run` (new keyword arguments are optional so existing callers keep working):

* ``workspace`` is the writable directory; it is canonicalised and refused (:class:`.WorkspaceRefused`, nothing
  runs) when it is ``/``, a system directory or inside one (``/etc``, ``/proc``, ``/usr``, ``/var``, ...), a shared
  top-level directory (``/home``, ``/tmp``), a home directory other than a project inside the caller's own, or
  overlaps ``data_dir``;
* ``leased_root``: the canonical root of the caller's workspace lease. When given it must already be canonical
  and ``workspace`` must be it or lie under it. When omitted the boundary says the workspace was not proven leased;
* ``data_dir``: the system's data dir: never writable, never visible (``extra_ro`` overlapping it is refused);
* ``network``: a :class:`.NetworkPolicy`; ``allow_network`` stays as the shorthand for "any public host".
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ..core import procs
from .netproxy import NetProxy
from .sandbox_argv import BRIDGE_SOURCE as BRIDGE_SOURCE  # re-exported: the argv and boundary live there
from .sandbox_argv import DEFAULT_LANG as DEFAULT_LANG
from .sandbox_argv import DEFAULT_PATH as DEFAULT_PATH
from .sandbox_argv import NONE_BOUNDARY as NONE_BOUNDARY
from .sandbox_argv import PROXY_DIR as PROXY_DIR
from .sandbox_argv import PROXY_ENV_KEYS as PROXY_ENV_KEYS
from .sandbox_argv import PROXY_PORT as PROXY_PORT
from .sandbox_argv import Boundary as Boundary
from .sandbox_argv import SandboxMode as SandboxMode
from .sandbox_argv import build_argv as build_argv
from .sandbox_argv import bwrap_boundary as bwrap_boundary
from .sandbox_argv import proxy_env as proxy_env
from .sandbox_argv import sandbox_env as sandbox_env
from .sandbox_fs import SandboxError as SandboxError  # re-exported: callers catch it from here
from .sandbox_fs import WorkspaceRefused as WorkspaceRefused
from .sandbox_fs import canonical_dir as canonical_dir
from .sandbox_fs import check_run_paths, system_view, under
from .sandbox_netpolicy import NetworkPolicy as NetworkPolicy
from .sandbox_proc import Capture, supervise

FailureKind = Literal["not_installed", "no_user_namespaces", "uid_map_refused", "mount_refused", "not_isolating",
                      "other"]

OUTPUT_LIMIT = 1 << 20  # bytes kept per stream; the rest is drained and dropped
PROBE_TIMEOUT_S = 10.0


class SandboxUnavailable(SandboxError):
    """The bwrap sandbox was asked for but does not work here; nothing was run."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"bwrap sandbox unavailable ({kind}): {detail or 'no detail'}; refusing to run unsandboxed")
        self.kind = kind
        self.detail = detail


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
    network_refusals: tuple[str, ...] = ()  # what the proxy refused ("host: reason"), in order


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
    "not_isolating": ("the binary ran the probe without isolating it: it is not a working bubblewrap",
                      "give the path of a real bubblewrap binary (--bwrap PATH), or install bubblewrap"),
    "other": ("bwrap failed", "see bwrap's message above"),
}


# The probe's command: its pid in its pid namespace, then the namespaces it runs in (one line each, as ``pid:[N]``).
PROBED_NAMESPACES = ("pid", "mnt", "net", "ipc", "uts")  # user and cgroup: bwrap only tries to unshare them
PROBE_COMMAND = ("sh", "-c", 'echo "$$"; exec readlink ' + " ".join(f"/proc/self/ns/{n}" for n in PROBED_NAMESPACES))


def isolation_failure(stdout: str, host: dict[str, str] | None = None) -> str | None:
    """Why the probe's output (:data:`PROBE_COMMAND`'s) does not prove it ran isolated, or None if it does: its pid
    must be 1 or 2 (a pid namespace of its own) and each of :data:`PROBED_NAMESPACES` other than ``host``'s (default:
    this process's)."""
    lines = stdout.split()
    if len(lines) != 1 + len(PROBED_NAMESPACES):
        return f"the probe reported no namespaces (its output: {stdout.strip()[:200]!r})"
    mine = host if host is not None else {n: _namespace(n) for n in PROBED_NAMESPACES}
    shared = [n for n, seen in zip(PROBED_NAMESPACES, lines[1:], strict=True)
              if not seen.startswith(f"{n}:[") or seen == mine.get(n)]
    if shared:
        return f"the probe ran in the host's {', '.join(shared)} namespace(s) (it saw {' '.join(lines[1:])})"
    if lines[0] not in ("1", "2"):
        return f"the probe's pid in its pid namespace was {lines[0][:20]}, not 1 or 2"
    return None


def _namespace(name: str) -> str:
    try:
        return os.readlink(f"/proc/self/ns/{name}")
    except OSError:
        return "?"


def probe(bwrap_path: str | None = None) -> Probe:
    """Run bwrap once, with the flags real commands use, around :data:`PROBE_COMMAND`; check that the command ran
    isolated (:func:`isolation_failure`); then read its version."""
    path = bwrap_path if bwrap_path is not None else shutil.which("bwrap")
    uid = os.getuid()
    if path is None:
        return Probe(False, SandboxMode.BWRAP, _KINDS["not_installed"][0], "not_installed",
                     "bwrap not found on PATH", uid=uid)
    scratch = tempfile.mkdtemp(prefix="ouroactors-probe-")
    argv: list[str] = []
    out = ""
    try:
        argv = build_argv(list(PROBE_COMMAND), workspace=scratch, allow_network=False, bwrap=path)
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env={},
                                  timeout=PROBE_TIMEOUT_S)
            rc, err = done.returncode, done.stderr.decode(errors="replace")
            out = done.stdout.decode(errors="replace")
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
    if (unproven := isolation_failure(out)) is not None:
        return Probe(False, SandboxMode.BWRAP, f"{_KINDS['not_isolating'][0]}: {unproven}", "not_isolating",
                     detail, flags=tuple(argv), path=path, uid=uid)
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
                 "boundary: read-only allow-listed view (/usr, /bin, /lib*, /etc entries, toolchain); writable: the "
                 "workspace only; private /tmp; own network namespace always (granted network only through the "
                 "runtime's domain-enforcing proxy); all capabilities dropped; die-with-parent; new session; "
                 "cleared environment; no seccomp filter"]
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


@dataclass
class Plan:
    """One command, decided and ready to spawn: what :func:`run` and :func:`.sandbox_trio.run_async` share.

    Every containment decision (the probe, the argv, the environment, the boundary, the lease root, the proxy) is
    made here, once; the two runners differ only in how they wait (a selector loop in the calling thread, or trio).
    """

    command: tuple[str, ...]
    mode: SandboxMode
    argv: list[str]
    cwd: str
    env: dict[str, str] | None
    boundary: Boundary
    proxy: NetProxy | None
    command_mark: str | None = None  # unsandboxed: the mark in the command's environment its leftovers are found by

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start the command in its own session (its pid is its process group id); the plan's proxy, if any, is the
        caller's to close (:meth:`close`), also when this raises."""
        try:  # bufsize=0: the runners read the pipes' fds themselves; buffered readers on them were never used
            return subprocess.Popen(self.argv, bufsize=0, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, cwd=self.cwd, env=self.env, start_new_session=True,
                                    close_fds=True)
        except OSError as exc:
            if self.mode is SandboxMode.BWRAP:
                raise SandboxUnavailable("not_installed", f"{self.argv[0]}: {exc}") from exc
            raise SandboxError(f"could not start {self.command[0]!r}: {exc}") from exc

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.close()

    def result(self, proc: subprocess.Popen[bytes], out: Capture, err: Capture, timed_out: bool, notes: list[str],
               started: float) -> Result:
        refused = tuple(self.proxy.refusals) if self.proxy is not None else ()
        return Result(proc.returncode, bytes(out.data), bytes(err.data), out.truncated, err.truncated, self.boundary,
                      timed_out, time.monotonic() - started, tuple(self.argv), tuple(notes), refused)


def plan(command: Sequence[str], *, mode: SandboxMode, workspace: str, allow_network: bool = False,
         timeout: float = 60, env: Mapping[str, str] | None = None, probe: Probe | None = None,
         extra_ro: tuple[str, ...] = (), network: NetworkPolicy | None = None, leased_root: str | None = None,
         data_dir: str | None = None) -> Plan:
    """Decide how ``command`` runs under ``mode`` (see the module doc); raises before anything starts."""
    mode = SandboxMode(mode)  # fail closed on strings that are not a mode
    if not command or not timeout > 0:
        raise SandboxError(f"need a command and a positive timeout (got {list(command)!r}, {timeout!r})")
    if network is not None and not isinstance(network, NetworkPolicy):
        raise SandboxError(f"network must be a NetworkPolicy, got {type(network).__name__}")
    ws = check_run_paths(workspace, leased_root=leased_root, data_dir=data_dir, extra_ro=extra_ro)
    granted = allow_network or network is not None
    if mode is not SandboxMode.BWRAP:
        boundary = NONE_BOUNDARY
        if network is not None:  # honest: a grant asked for, nothing to enforce it with
            boundary = replace(boundary, notes=(*boundary.notes, f"requested {network.describe()} is NOT enforced "
                                                                  "unsandboxed: the host's network is reachable"))
        # the marks last: what the command leaves in a session of its own ends with the command (its own mark) and
        # else with its runtime's SIGKILL or the system (the lineage marks, ouroactors.core.procs), as bwrap's pid
        # namespace makes everything end with the command
        mark = secrets.token_hex(8)
        return Plan(tuple(command), mode, list(command), ws,
                    {**sandbox_env(ws, env), **procs.lineage(), procs.COMMAND_MARK: mark}, boundary, None, mark)
    found = probe if probe is not None else probe_cached()
    if not found.available or found.path is None:
        raise SandboxUnavailable(found.failure_kind or "other", found.detail)
    policy = network or NetworkPolicy()
    view = system_view()
    data = os.path.realpath(data_dir) if data_dir is not None else None
    if data is not None and any(e.kind == "bind" and under(data, e.path) for e in view):
        raise SandboxError(f"the data dir {data_dir!r} lies inside the read-only view (the toolchain?): "
                           "it would be visible to the command")
    proxy = NetProxy(policy) if granted else None
    try:
        argv = build_argv(command, workspace=ws, allow_network=granted, extra_ro=extra_ro, env=env,
                          bwrap=found.path, proxy_dir=proxy.directory if proxy else None, view=view)
    except BaseException:
        if proxy is not None:
            proxy.close()
        raise
    boundary = bwrap_boundary(workspace=ws, allow_network=granted, extra_ro=extra_ro, version=found.version,
                              env_keys=len(env or {}), network=policy, view=view, leased_root=leased_root)
    # bwrap sets the command's environment itself (--clearenv); its own carries the lineage marks only
    return Plan(tuple(command), mode, argv, ws, procs.lineage(), boundary, proxy)


def run(command: Sequence[str], *, mode: SandboxMode, workspace: str, allow_network: bool = False,
        timeout: float = 60, env: Mapping[str, str] | None = None, probe: Probe | None = None,
        extra_ro: tuple[str, ...] = (), output_limit: int = OUTPUT_LIMIT, network: NetworkPolicy | None = None,
        leased_root: str | None = None, data_dir: str | None = None) -> Result:
    """Run ``command`` under ``mode``; the result carries the boundary that applied (see the module doc)."""
    p = plan(command, mode=mode, workspace=workspace, allow_network=allow_network, timeout=timeout, env=env,
             probe=probe, extra_ro=extra_ro, network=network, leased_root=leased_root, data_dir=data_dir)
    try:
        started = time.monotonic()
        proc = p.spawn()
        out, err, timed_out, notes = supervise(proc, timeout, output_limit, p.command_mark)
    finally:
        p.close()
    return p.result(proc, out, err, timed_out, notes, started)
