"""The shipped agent tree set up for a local session: its workspace root and permission rules, and a demo workspace.

Plain data and files — no actor is started and no LMDB environment is opened here. ``ouroactors demo``
(:mod:`ouroactors.cli.demo_agent`) and the session fault workload (:mod:`ouroactors.faults.session_workload`) both
run this tree; it lives in the runtime layer so that neither imports the other's (the CLI sits above the faults).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import SpecError
from ..supervision.specs import ChildSpec
from ..system.config import load_tree
from ..trees import HERE as TREES

AGENT_TOML = TREES / "agent.toml"  # package data: there from a wheel as from a checkout

# The demo session's permissions (user scope; agent.toml's node rules stay as they are). Reading, the grep
# the model runs and the slow command of step 5 are allowed; nothing covers editing NOTES.md, so that edit
# asks for an approval — the operator answers it. ``Write(demo.log)`` covers the slow command's redirect only.
DEMO_RULES = ["allow:Read(**)", "allow:Bash(grep *)", "allow:Bash(sleep *)", "allow:Bash(echo *)",
              "allow:Write(demo.log)"]

NOTES = "# Notes\n\n- [ ] try the demo\n- [ ] read DESIGN.md\n"

def workspace_for(data_dir: Path) -> Path:
    """The demo's workspace: BESIDE the data dir, never inside it.

    The sandbox and the grants authority refuse any workspace inside or overlapping the data dir, by
    design: the data dir holds the LMDB environment, the operator's credentials and the journal, and a
    session able to write there could forge its own approvals or history.
    """
    return data_dir.parent / f"{data_dir.name}-workspace"


def agent_tree(workspace: Path, spare_runtimes: int | None = None) -> ChildSpec:
    """The shipped agent tree (``ouroactors/trees/agent.toml``), with the demo's workspace root and permission rules
    (and the session directory's ``spare_runtimes``, when given, instead of the file's)."""
    if not AGENT_TOML.is_file():
        raise SpecError([("", "the shipped agent tree is missing: the installation is incomplete "
                              "(reinstall ouroactors)")], str(AGENT_TOML))
    tree = load_tree(AGENT_TOML).tree
    children = []
    for child in tree.children or ():
        if child.id == "grants":
            node_rules = dict(child.kwargs.get("rules", {})).get("node", [])
            child = child.model_copy(update={"kwargs": {**child.kwargs,
                                                        "rules": {"node": list(node_rules), "user": DEMO_RULES}}})
        elif child.id == "workspace":
            child = child.model_copy(update={"kwargs": {**child.kwargs, "allowed_roots": [str(workspace)]}})
        elif child.id == "sessions" and spare_runtimes is not None:
            child = child.model_copy(update={"kwargs": {**child.kwargs, "spare_runtimes": spare_runtimes}})
        children.append(child)
    return tree.model_copy(update={"children": tuple(children)})


@dataclass(frozen=True)
class Workspace:
    path: Path
    git: bool  # False: git is not installed here, the workspace is a plain directory


def prepare_workspace(path: Path) -> Workspace:
    """A fresh NOTES.md (and no demo.log) in ``path``, committed to git when git is installed."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "NOTES.md").write_text(NOTES)
    (path / "demo.log").unlink(missing_ok=True)
    git = shutil.which("git")
    if git is None:
        return Workspace(path.resolve(), False)
    run = {"cwd": path, "capture_output": True, "check": True, "timeout": 30}
    if not (path / ".git").exists():
        subprocess.run([git, "init", "-q"], **run)  # type: ignore[call-overload]
    subprocess.run([git, "add", "NOTES.md"], **run)  # type: ignore[call-overload]
    subprocess.run([git, "-c", "user.name=ouroactors demo", "-c", "user.email=demo@localhost", "commit", "-q",
                    "--allow-empty", "-m", "demo: fresh notes"], **run)  # type: ignore[call-overload]
    return Workspace(path.resolve(), True)


__all__ = ["AGENT_TOML", "DEMO_RULES", "NOTES", "Workspace", "agent_tree", "prepare_workspace", "workspace_for"]
