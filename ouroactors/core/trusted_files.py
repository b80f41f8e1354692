"""Files the system trusts: refuse those another local user could have written.

The data directory holds state every authority believes (the LMDB environment, the node epoch,
the system's secret). On a shared host a file there that another user owns, or that group or
others may write, could have been planted or edited by someone else; reading it would let that
user steer the system. So such a file is refused with an error naming it and what is wrong, and
nothing is opened or changed.

The check follows no symlink: a link is refused as such (its target could be anywhere).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import OuroactorsError


class UntrustedFile(OuroactorsError):
    """A file in the data directory that another local user could have written."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}; refusing to trust it (fix the owner and mode, or remove it)")


def check_trusted(path: str | os.PathLike[str], *, owner: int | None = None) -> bool:
    """Raise :class:`UntrustedFile` unless ``path`` is a plain file or directory ``owner`` controls.

    ``owner`` defaults to the effective uid. Returns False if the path does not exist (nothing to
    trust yet), True if it was checked.
    """
    uid = os.geteuid() if owner is None else owner
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    name = str(path)
    if stat.S_ISLNK(info.st_mode):
        raise UntrustedFile(name, "is a symbolic link")
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        raise UntrustedFile(name, "is not a regular file or directory")
    if info.st_uid != uid:
        raise UntrustedFile(name, f"is owned by uid {info.st_uid}, not by uid {uid} that runs the system")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UntrustedFile(name, f"is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})")
    return True


def check_all_trusted(paths: list[Path], *, owner: int | None = None) -> None:
    """:func:`check_trusted` on each path that exists."""
    for path in paths:
        check_trusted(path, owner=owner)
