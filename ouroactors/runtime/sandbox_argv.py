"""The bwrap command line and the boundary it gives: pure descriptions, nothing is run here.

Split from :mod:`.sandbox` (which re-exports every name) because building the argv and describing the boundary is
its own concept: a pure function of the command, the workspace and the read-only view, tested on its own
(``tests/sandbox/test_pure.py``), while :mod:`.sandbox` decides (probe, plan) and runs. What the argv holds: an
empty root (a tmpfs remounted read-only) with only the allow-listed read-only view of :mod:`.sandbox_fs`, fresh
``/dev`` and ``/proc``, a private tmpfs ``/tmp``, the workspace bound writable; every namespace unshared
**including the network, always**; all capabilities dropped; die-with-parent; a new session; a cleared
environment. With a granted network the command is started by the in-sandbox bridge (:mod:`.sandbox_bridge`),
which forwards ``127.0.0.1:3128`` of the sandbox's own loopback to the proxy's socket bound at :data:`PROXY_DIR`.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from .netproxy import SOCKET_NAME
from .sandbox_fs import SandboxError, ViewEntry, canonical_dir, system_view, view_args
from .sandbox_netpolicy import NetworkPolicy

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEFAULT_LANG = "C.UTF-8"
PROXY_DIR = "/run/ouroactors-proxy"  # where the proxy's socket directory appears inside the sandbox
PROXY_PORT = 3128  # the bridge's port on the sandbox's own loopback
PROXY_ENV_KEYS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
BRIDGE_SOURCE = (Path(__file__).parent / "sandbox_bridge.py").read_text()
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


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
    network_policy: str = "none"  # none | proxy(domains…; private: …) | host (unsandboxed)
    visible: tuple[str, ...] = ()  # the read-only host view (paths bound or recreated as symlinks)
    leased_root: str | None = None  # the lease's canonical root the caller proved, if any



def sandbox_env(workspace: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment a command sees: PATH, HOME=workspace, LANG, then ``env`` (which may override)."""
    merged = {"PATH": DEFAULT_PATH, "HOME": workspace, "LANG": DEFAULT_LANG}
    for key, value in (env or {}).items():
        if not _ENV_KEY.match(key) or "\0" in value:
            raise SandboxError(f"invalid environment entry {key!r}")
        merged[key] = value
    return merged


def bridge_python() -> str:
    """The interpreter that runs the in-sandbox bridge: the *base* Python, canonical. The bridge needs the standard
    library only (``-I -S``), and a virtualenv's ``bin/python`` may lie where the sandbox mounts a fresh ``/tmp``
    (or in a home directory, which it does not show at all), whereas the base install is the toolchain it binds."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable or "python3")


def proxy_env(port: int = PROXY_PORT) -> dict[str, str]:
    """The variables that send HTTP clients inside the sandbox to the bridge (both cases: tools disagree)."""
    url = f"http://127.0.0.1:{port}"
    return {**dict.fromkeys(PROXY_ENV_KEYS, url), "no_proxy": "", "NO_PROXY": ""}


def build_argv(command: Sequence[str], *, workspace: str, allow_network: bool, extra_ro: tuple[str, ...] = (),
               env: Mapping[str, str] | None = None, bwrap: str = "bwrap", proxy_dir: str | None = None,
               view: Sequence[ViewEntry] | None = None, python: str | None = None) -> list[str]:
    """The bwrap argv for ``command``. Pure given ``view`` (default: :func:`.system_view` of this host), apart
    from canonicalising paths (which must exist). ``allow_network`` needs ``proxy_dir``: the host directory
    holding the proxy's socket, bound read-only at :data:`PROXY_DIR`; the command is then run by the bridge."""
    if not command:
        raise SandboxError("empty command")
    if allow_network and proxy_dir is None:
        raise SandboxError("network is granted only through the proxy: proxy_dir is required")
    ws = canonical_dir(workspace)
    argv = [bwrap, "--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--new-session"]
    argv += view_args(system_view() if view is None else view)
    argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--dir", "/run", "--bind", ws, ws]
    for path in extra_ro:  # after the workspace bind, so a path inside the workspace can be made read-only
        real = os.path.realpath(path)
        if not os.path.exists(real):  # binding over a missing path would create it on the host
            raise SandboxError(f"read-only path {path!r} does not exist")
        argv += ["--ro-bind", real, real]
    if allow_network:
        argv += ["--ro-bind", os.path.realpath(proxy_dir or ""), PROXY_DIR]
    argv += ["--remount-ro", "/", "--chdir", ws, "--clearenv"]
    merged = sandbox_env(ws, env)
    if allow_network:
        merged.update(proxy_env())
    for key, value in merged.items():
        argv += ["--setenv", key, value]
    if allow_network:
        bridge = [python or bridge_python(), "-I", "-S", "-c", BRIDGE_SOURCE, f"{PROXY_DIR}/{SOCKET_NAME}",
                  str(PROXY_PORT), "--"]
        return [*argv, "--", *bridge, *command]
    return [*argv, "--", *command]


def bwrap_boundary(*, workspace: str, allow_network: bool, extra_ro: tuple[str, ...] = (),
                   version: str | None = None, env_keys: int = 0, network: NetworkPolicy | None = None,
                   view: Sequence[ViewEntry] | None = None, leased_root: str | None = None) -> Boundary:
    ws = canonical_dir(workspace)
    policy = (network or NetworkPolicy()) if allow_network else None
    shown = tuple(e.path for e in (system_view() if view is None else view))
    notes = [
        "namespaces unshared: mount, pid, ipc, uts, user, cgroup and network (always)",
        f"network only through the runtime's proxy: {policy.describe()}; the host's addresses are unreachable"
        if policy is not None else "network namespace unshared: loopback only, no route out",
        "root is an empty read-only tmpfs holding an allow-listed read-only view; "
        "no home directories, /run, /var, data dir or host /tmp",
        "all capabilities dropped (--cap-drop ALL), no_new_privs",
        "no seccomp filter",
        "new session: no controlling terminal",
        f"environment cleared: PATH, HOME, LANG and {env_keys} given" + (", proxy variables" if policy else ""),
        "processes left running die with the command's pid namespace",
        "die-with-parent is racy while bwrap starts (bubblewrap#633): a runtime killed then can orphan it",
        f"workspace leased: {leased_root}" if leased_root is not None
        else "workspace not proven leased (the caller gave no leased_root)",
    ]
    return Boundary(mode=SandboxMode.BWRAP, read_only_root=True, writable=(ws,), network=policy is not None,
                    private_tmp=True, die_with_parent=True, backend_version=version, notes=tuple(notes),
                    read_only=tuple(os.path.realpath(p) for p in extra_ro),
                    network_policy=policy.describe() if policy is not None else "none", visible=shown,
                    leased_root=leased_root)


NONE_BOUNDARY = Boundary(
    mode=SandboxMode.NONE, read_only_root=False, writable=("/",), network=True, private_tmp=False,
    die_with_parent=False, backend_version=None,
    notes=("unsandboxed: explicit none mode", "writes limited only by the host uid's permissions",
           "network: the host's own, no proxy and no domain enforcement",
           "cleanup at the command's end: its process group, and what left it for a session of its own (found by "
           "the command's mark in its environment; a process that clears its environment escapes)"),
    network_policy="host (unsandboxed)", visible=("/",))
