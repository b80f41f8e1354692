"""What a runtime does before any session is opened on it, so that the open (and the first turn) need not.

A runtime is a fresh process forked from the execution supervisor, and much of what a session's open costs is paid
once per process: the first run through the code of the grants evaluator, the sandbox's planner, the session
configuration's validators and the journal's encoder touches memory the process shares copy-on-write with its
parent, and fills caches (parsed rules, digests) that later calls find warm. Two places take that cost off a
message's way:

* :func:`preload`, in the **execution supervisor** before it forks any runtime: what is the same in every runtime
  and needs no LMDB environment (a supervisor must not open one: it forks) — the digest of the default tool set
  and a default session configuration parsed once, so every runtime inherits those caches.
* :func:`rehearse`, in a **runtime nobody has opened yet** (:data:`REHEARSE_AFTER_S` after its start: a spare the
  session directory keeps, see :mod:`..coordinator.spares`; a runtime its coordinator started for a message is
  opened well before then): a dry run of the open's process-wide work — a sandbox plan in a scratch directory,
  one grants decision made on the node's durable policy and thrown away, a session configuration parsed and a
  ``session_opened``-like record encoded. Nothing durable is written and nothing is sent (the event log gets
  ``runtime_rehearsed``, with its duration); nothing it computes is kept as a session's state: the open still
  reads, parses and decides everything afresh. Measured in the agent tree (bench_peers' sessions, trace marks):
  ~1.5 ms less per open on a spare, of ~11 ms.

A failure here is nobody's: the open that meets the same problem reports it (the rehearsal swallows every error).
"""

from __future__ import annotations

import logging
import tempfile
from typing import Any

log = logging.getLogger("ouroactors.runtime")

REHEARSE_AFTER_S = 0.05  # an unopened runtime rehearses its open after this long (its opener, if any, came first)
WARM_SESSION = "warm-up"  # the session id of the rehearsal's throwaway decision (nothing is recorded under it)


def sandbox_modes() -> tuple[Any, ...]:
    """The sandbox modes a session may run in here: ``none``, and ``bwrap`` when the (cached) probe says it works."""
    from ..sandbox import SandboxMode, probe_cached

    return (SandboxMode.NONE, SandboxMode.BWRAP) if probe_cached().available else (SandboxMode.NONE,)


def preload() -> None:
    """In the execution supervisor: fill the caches every runtime it forks inherits (see the module docstring) — the
    sandbox's probe and planner (one command planned in each mode: the account database, the read-only view), the
    default tool set's digest, a default configuration parsed."""
    from . import tool_set
    from .config import TOOL_NAMES, parse_session_config
    from .tools.shell import warm as warm_shell

    with tempfile.TemporaryDirectory(prefix="ouroactors-preload-") as root:
        for mode in sandbox_modes():
            warm_shell(root, mode, None)
    tool_set.digest(TOOL_NAMES)
    parse_session_config({}, "preload")


def rehearse(env: Any, data_dir: str) -> None:
    """In an unopened runtime: run the open's process-wide work once, keeping nothing (see the module docstring)."""
    from ...authorities.grants.inline import InlineGrants
    from .config import parse_session_config
    from .journal_format import _encode
    from .tools.shell import warm as warm_shell

    modes = sandbox_modes()
    try:
        config = parse_session_config({}, "rehearsal")
        _encode("session_opened", {"config": config.model_dump(mode="python"), "config_digest": config.digest()},
                None, 0)
        with tempfile.TemporaryDirectory(prefix="ouroactors-rehearsal-") as root:
            for mode in modes:
                warm_shell(root, mode, data_dir)
            InlineGrants(env).warm(WARM_SESSION, root)
    except Exception as exc:  # the open that meets it reports it
        log.debug("a runtime's rehearsal failed (the open will say why): %r", exc)


__all__ = ["REHEARSE_AFTER_S", "WARM_SESSION", "preload", "rehearse", "sandbox_modes"]
