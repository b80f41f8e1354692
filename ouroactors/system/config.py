"""Tree files: a supervision tree and its system settings in TOML.

::

    [system]
    base = "multiproc"          # or "simple"
    data_dir = ".ouroactors"

    [tree]                      # the root supervisor
    id = "app"
    strategy = "rest_for_one"
    intensity = 3
    period = 5

    [[tree.children]]
    id = "store"
    actor = "myapp.store:Store"
    kwargs = { path = "/var/lib/app" }

Loading yields the same :class:`~ouroactors.supervision.specs.ChildSpec` objects the Python API
builds, so a tree written either way compares equal. Every problem names its place: TOML syntax
errors carry line and column, spec errors a key path such as ``tree.children[2].restart``.
Nothing is started or written while a file is checked.
"""

from __future__ import annotations

import difflib
import sys
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core.errors import SpecError
from ..supervision.spec_errors import described
from ..supervision.specs import ChildSpec, build_spec, format_location


class SystemSettings(BaseModel):
    """The ``[system]`` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: Literal["multiproc", "simple"] = "multiproc"
    data_dir: str = ".ouroactors"
    bind_host: str = "127.0.0.1"
    capabilities: dict[str, Any] = Field(default_factory=dict)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING"  # actors' lines in admin.out


class TreeFile(BaseModel):
    model_config = ConfigDict(frozen=True)

    system: SystemSettings
    tree: ChildSpec


_TOP_LEVEL = ("system", "tree")


def load_tree(path: str | Path) -> TreeFile:
    """Read and validate a tree file; raise :class:`SpecError` naming what is wrong and where.

    The tree's actors are imported from the project the file belongs to: see :func:`project_import_path`.
    A bare name of a shipped tree (``"agent"``, ``"example"``: :mod:`ouroactors.trees`) with no file of that name
    here reads the shipped file, so the CLI's TREE_FILE works the same from a wheel as from a checkout.
    """
    path = _shipped_or(path)
    source = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")  # TOML is UTF-8, whatever the locale says
    except OSError as exc:
        hint = "; the shipped trees are named agent and example" if isinstance(exc, FileNotFoundError) else ""
        raise SpecError([("", f"cannot read tree file: {exc.strerror}{hint}")], source) from None
    except UnicodeDecodeError as exc:
        raise SpecError([("", f"cannot read tree file: not valid UTF-8 (byte {exc.object[exc.start]:#04x} at offset "
                              f"{exc.start}); a tree file is TOML, which is UTF-8")], source) from None
    for directory in project_import_path(Path(path)):
        if directory not in sys.path:
            sys.path.append(directory)  # after site-packages: an installed package still wins
    return parse_tree(text, source)


def _shipped_or(path: str | Path) -> str | Path:
    """``path``, or the shipped tree it names when it is a bare name (no directory, no suffix) and no such file
    exists: an existing file always wins, and anything that looks like a path is never second-guessed."""
    if isinstance(path, str) and path and Path(path).name == path and not Path(path).suffix \
            and not Path(path).exists():
        from ..trees import bundled  # package data only: no import cost for a plain path

        return bundled(path) or path
    return path


_PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")


def project_import_path(tree_file: Path) -> list[str]:
    """Where a tree's ``myapp.module:Class`` actors are looked for, besides what is installed.

    A user runs ``ouroactors run trees/app.toml`` or plain ``pytest`` from their project without installing it
    and without ``PYTHONPATH=.``. Like pytest's rootdir, we add the current directory, the tree file's directory
    and the nearest ancestor of the tree file that holds a ``pyproject.toml``, ``setup.py`` or ``setup.cfg``.
    Actor processes are forked from this one, so they inherit the same path.
    """
    here = tree_file.resolve().parent
    found = [str(Path.cwd()), str(here)]
    for ancestor in (here, *here.parents):
        if any((ancestor / name).exists() for name in _PROJECT_FILES):
            found.append(str(ancestor))
            break
    return list(dict.fromkeys(found))


def parse_tree(text: str, source: str = "<string>") -> TreeFile:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError([("", f"malformed TOML: {exc}")], source) from None
    problems: list[tuple[str, str]] = []
    for key in data:
        if key not in _TOP_LEVEL:
            close = difflib.get_close_matches(key, _TOP_LEVEL, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append((key, f"unknown table {key!r}{hint}; a tree file has [system] and [tree]"))
    if "tree" not in data:
        problems.append(("tree", "is required: the root supervisor ([tree] with id and children)"))
    for key, what in (("system", "[system] with base and data_dir"), ("tree", "[tree] with id and children")):
        if key in data and not isinstance(data[key], dict):  # `tree = 5`, `tree = [["id", "x"]]`
            problems.append((key, f"must be a table ({what}), got {described(data[key])}"))
    if problems:
        raise SpecError(problems, source)
    try:
        settings = SystemSettings.model_validate(data.get("system", {}))
    except ValidationError as exc:
        raise SpecError(_system_problems(exc), source) from None
    root = dict(data["tree"])
    root.setdefault("type", "supervisor")
    if root["type"] != "supervisor":
        raise SpecError([("tree.type", f"the root of a tree must be a supervisor; got {root['type']!r}")], source)
    try:
        tree = build_spec(root)
    except SpecError as exc:
        raise SpecError([(_prefix(loc), msg) for loc, msg in exc.problems], source) from None
    return TreeFile(system=settings, tree=tree)


def _system_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """The ``[system]`` table's errors as the tree's are given: an unknown key with the nearest valid one, a
    wrong value with the value given (``system.base: ... got 'multi'``)."""
    problems = []
    for error in exc.errors():
        loc = "system." + format_location(tuple(error["loc"]))
        if error["type"] == "extra_forbidden":
            key = str(error["loc"][-1])
            close = difflib.get_close_matches(key, list(SystemSettings.model_fields), n=1)
            message = f"unknown key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
        else:
            message = str(error["msg"])
            if "input" in error and error["type"] != "missing":
                message = f"{message}; got {error['input']!r}"
        problems.append((loc, message))
    return problems


def _prefix(loc: str) -> str:
    return f"tree.{loc}" if loc else "tree"
