"""The actor processes of the agent tree do not import httpx until an HTTP call is made.

httpx imports its command line at import, and with it rich and pygments (installed here: the CLI uses rich) —
about 0.1-0.3 s measured. The runtime, the coordinator and the session directory each paid it at start though a
session on the scripted model never makes an HTTP call (see ``ouroactors.runtime.execution.tls``).
"""

from __future__ import annotations

import subprocess
import sys

ACTOR_MODULES = (
    "ouroactors.runtime.execution.runtime",
    "ouroactors.runtime.coordinator.actor",
    "ouroactors.runtime.coordinator.directory",
    "ouroactors.cli.demo",
)


def _imported_after(modules: tuple[str, ...], then: str = "") -> set[str]:
    code = ("import sys\n" + "".join(f"import {m}\n" for m in modules) + then
            + "print(' '.join(m for m in ('httpx', 'pygments', 'rich.syntax') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return set(done.stdout.split())


def test_the_actor_modules_import_no_http_client() -> None:
    assert _imported_after(ACTOR_MODULES) == set()


def test_an_http_call_imports_it_when_it_is_made() -> None:
    then = "from ouroactors.runtime.execution import tls\ntls.context()\n"
    assert "httpx" in _imported_after(ACTOR_MODULES, then)


def test_a_forked_coordinator_checks_a_sessions_tools_without_importing() -> None:
    """Each session's coordinator is forked from its supervisor's process, which imported the coordinator module.
    The tools check of a session's message (``tool_set.check``) then imports nothing: the registry came with the
    module (it cost every session start ~45 ms in the freshly forked coordinator)."""
    code = ("import sys\n"
            "import ouroactors.runtime.coordinator.actor\n"
            "from ouroactors.runtime.execution import tool_set\n"
            "before = set(sys.modules)\n"
            "tool_set.check('s1', tool_set.digest(('read', 'list', 'shell')), ('read', 'list', 'shell'))\n"
            "print(' '.join(sorted(set(sys.modules) - before)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == []
