"""Shared helpers for the security suite: run a program as another local user.

The attacks in this suite come from a *different* uid than the one running the system, as they
would on a shared host. Where the machine has no second user (or we are not root and cannot switch),
the tests that need one skip with that reason.
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess
import sys

import pytest


def other_user() -> str | None:
    """The name of a second local user we can run programs as, or None."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        return None
    return "nobody"


def run_as_other_user(code: str, *, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code`` as the other local user (``nobody``), with no inherited fds."""
    user = other_user()
    if user is None:
        pytest.skip("needs root and a second local user (nobody) to switch to with setpriv")
    entry = pwd.getpwnam(user)
    argv = [
        "setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups",
        sys.executable, "-I", "-c", code,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd="/", close_fds=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})


@pytest.fixture
def as_other_user():
    """Return :func:`run_as_other_user` (skips when no second user is available)."""
    if other_user() is None:
        pytest.skip("needs root and a second local user (nobody) to switch to with setpriv")
    unable = _python_cannot_run_as_other_user()
    if unable:  # else every attack "fails" because its program never started: a pass that proves nothing
        pytest.skip(f"{sys.executable} does not run as nobody here: {unable}")
    return run_as_other_user


@functools.cache
def _python_cannot_run_as_other_user() -> str:
    """Why this interpreter cannot run as the other user ("" when it can): a virtualenv's python linked against a
    libpython under a directory nobody may read, say."""
    probe = run_as_other_user("print('ran')")
    return "" if probe.stdout.strip() == "ran" else (probe.stderr.strip() or f"exit {probe.returncode}")[:300]
