"""The workspace's CheckRoot (what ``session new`` asks) judges the real path, as Acquire does, on real processes.

Attacks: a path out through a symlink, ``..`` after a symlink, ``/proc/self/cwd``, the root spelled in another case,
a file instead of a directory, junk at the door. Each is refused with a reason (or answered with the canonical root
when it does land inside), nothing is leased, and the authority does not restart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ouroactors import supervisor, worker
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.workspace.messages import CheckRoot
from ouroactors.core.errors import BadRequest, OuroactorsError

pytestmark = pytest.mark.multiproc


def tree(allowed: str):
    return supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("workspace", "ouroactors.authorities.workspace.actor:Workspace", kwargs={"allowed_roots": [allowed]}),
    ])


def test_check_root_judges_where_the_path_lands_and_leases_nothing(actor_system, tmp_path: Path) -> None:
    allowed = tmp_path / "projects"
    (allowed / "repo" / "sub").mkdir(parents=True)
    outside = tmp_path / "secret"
    outside.mkdir()
    (allowed / "out").symlink_to(outside)  # a link inside the root that leads out
    (allowed / "file.txt").write_text("x")
    actor_system.start_tree(tree(str(allowed)))
    pid = actor_system.child_info("agent/workspace").pid

    def check(root: str) -> object:
        return _ask(actor_system, CheckRoot(root))

    assert check(str(allowed / "repo")) == str((allowed / "repo").resolve())
    # `..` after a link inside: it lands inside (under the link's target's parent it would not): judged where it lands
    assert check(str(allowed / "repo" / "sub" / ".." / "sub")) == str((allowed / "repo" / "sub").resolve())
    for escape in (allowed / "out",  # through the link
                   allowed / "out" / "..",  # `..` after the link: the target's parent, outside
                   allowed / ".." / "secret",
                   Path(str(allowed).upper()),  # another case of the root: another path on Linux
                   allowed / "file.txt",  # not a directory
                   allowed / "missing"):
        refused = check(str(escape))
        assert isinstance(refused, OuroactorsError), (escape, refused)
    # /proc/self/cwd is the *authority's* working directory: judged as where it resolves, never as written
    proc = check("/proc/self/cwd")
    assert isinstance(proc, OuroactorsError) or Path(str(proc)).is_relative_to(allowed.resolve())
    for junk in (None, 5, "x" * 5000, "", b"/tmp"):
        message = CheckRoot.__new__(CheckRoot)
        object.__setattr__(message, "__dict__", {"root": junk})  # as unpickled: no __init__ ran
        assert isinstance(_ask(actor_system, message), BadRequest), junk
    assert ask_authority(actor_system, "agent/workspace", "leases") == []  # a read: nothing leased
    assert actor_system.child_info("agent/workspace").pid == pid  # and nothing crashed it


def _ask(system, message) -> object:
    try:
        return ask_authority(system, "agent/workspace", message)
    except OuroactorsError as exc:
        return exc
