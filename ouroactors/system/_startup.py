"""Starting thespian's admin on a port that is really ours, and saying clearly when it cannot.

``free_port`` alone is racy: the port it found is closed again before the admin (a forked process)
binds it, and under load another process took it in between (EADDRINUSE, then thespian's obscure
``InvalidActorAddress ... not a valid ActorSystem admin`` five seconds later). So the port is
*reserved* until the admin has bound it: a socket bound to it with ``SO_REUSEADDR`` and not
listening keeps every other bind (and the kernel's choice of ephemeral ports) off it, while the
admin, which binds with ``SO_REUSEADDR`` too, can still take it. A chosen port taken before it
could be reserved is replaced by another; a port the caller named is refused at once; and
thespian's ``InvalidActorAddress`` becomes a clear :class:`ActorSystemError` (never a retry: an
admin that was only slow could still come up on the first port).

Also here, the other checks a start makes before anything forks: a convention address that parses
and answers, and a data dir created private (0700) whatever the umask.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from thespian.actors import ActorSystemException, InvalidActorAddress

from ..core.errors import ActorSystemError
from . import _patches

ATTEMPTS = 4


def free_port(host: str = "127.0.0.1") -> int:
    """A port free for both TCP and UDP on ``host`` right now."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
            tcp.bind((host, 0))
            port = int(tcp.getsockname()[1])
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                udp.bind((host, port))
            return port
        except OSError:
            continue
    raise ActorSystemError("no free port found")


def reserve(host: str, port: int) -> socket.socket:
    """Hold ``port`` on ``host`` (bound, not listening) until the admin has bound it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def start_admin(host: str, port: int | None, start: Callable[[int], Any]) -> tuple[Any, int]:
    """Run ``start(port)`` (which makes thespian fork its admin) on a reserved port; retry on a
    chosen port that was lost. Returns what ``start`` returned and the port used."""
    explicit = port is not None
    for _ in range(1 if explicit else ATTEMPTS):
        chosen = port if port is not None else free_port(host)
        try:
            held = reserve(host, chosen)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE and not explicit:
                continue  # taken since free_port saw it: choose again
            raise ActorSystemError(_in_use(host, chosen, exc)) from None
        _patches.reserved_sockets.append(held)  # the forked admin closes its copy first thing
        try:
            return start(chosen), chosen
        except (InvalidActorAddress, ActorSystemException, OSError) as exc:
            # Not a lost race (the port was held until the admin bound it), and an admin that was
            # merely slow may still come up on it: never start a second one elsewhere.
            raise ActorSystemError(
                f"the actor system's admin did not start on {host}:{chosen}: {exc} "
                "(is something else bound to that port, or is the machine overloaded?)"
            ) from None
        finally:
            with contextlib.suppress(ValueError):
                _patches.reserved_sockets.remove(held)
            held.close()
    raise ActorSystemError(f"no port on {host} stayed free long enough to start the admin")


def _in_use(host: str, port: int, exc: OSError) -> str:
    return (f"cannot start the admin on {host}:{port}: {exc.strerror or exc} "
            "(another process holds that port; choose another --admin-port or omit it)")


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ActorSystemError(f"{text!r} is not HOST:PORT")
    return host, int(port)


def refuse_unreachable(address: tuple[str, int], timeout: float = 2.0) -> None:
    """Fail fast (no hang) when nothing listens where a convention leader should be."""
    try:
        with socket.create_connection(address, timeout=timeout):
            return
    except OSError as exc:
        raise ActorSystemError(
            f"cannot join {address[0]}:{address[1]}: nothing answers there ({exc.strerror or exc}); "
            "start the leader first (ouroactors run TREE --leader --admin-port PORT)"
        ) from None


def make_private_dir(directory: Path) -> None:
    """Create the data dir 0700 whatever the umask (its secret, ledger and approvals are private).

    Only a directory created here is chmod'ed; an existing one is left as its owner made it — provided that owner is
    this user and neither group nor others may write in it (:func:`~ouroactors.core.trusted_files.check_trusted`,
    which raises ``UntrustedFile``; checked before the start writes anything there): another local user who owns it,
    or may create and rename files in it, could plant a marker, a secret or LMDB files, or swap them for links.
    """
    if directory.is_dir():
        from ..core.trusted_files import check_trusted

        check_trusted(directory)
        return
    directory.parent.mkdir(parents=True, exist_ok=True)
    try:
        directory.mkdir(mode=0o700)
    except FileExistsError:
        return
    os.chmod(directory, 0o700)  # mkdir's mode is masked by the umask
