"""What the frame attacks need: the processes and listening ports of a system, and a forged frame."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

from ouroactors.core.procs import members


class Touch:
    """Unpickling this creates ``path``: the proof that a frame's pickle ran in the receiver."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def forged_frames(path: Path) -> list[bytes]:
    """thespian's frame format (``b"<len>>" + pickle``), untagged and with a guessed tag."""
    body = pickle.dumps(Touch(str(path)))
    guessed = b"\x00" * 32 + body
    return [b"%d>" % len(body) + body, b"%d>" % len(guessed) + guessed]


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) processes of the system whose admin's group is ``pgid``: its session, of that id (each
    actor process leads a group of its own in it)."""
    return members(session=pgid)


def socket_inodes(pid: int) -> set[int]:
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def listening_tcp() -> dict[int, tuple[str, int]]:
    """inode -> (ip, port) of every listening IPv4 TCP socket on the machine."""
    out = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] != "0A":  # LISTEN
            continue
        hex_ip, hex_port = fields[1].split(":")
        ip = ".".join(str(int(hex_ip[i:i + 2], 16)) for i in (6, 4, 2, 0))
        out[int(fields[9])] = (ip, int(hex_port, 16))
    return out


def listeners_of(pid: int) -> list[tuple[str, int]]:
    """The listening IPv4 TCP sockets process ``pid`` holds."""
    table = listening_tcp()
    return sorted(table[inode] for inode in socket_inodes(pid) if inode in table)


def signal_mask(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no {field} in /proc/{pid}/status")


SEND_AS_ATTACKER = """
import socket, sys
frames = [bytes.fromhex(h) for h in {frames!r}]
for port in {ports!r}:
    for frame in frames:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(frame)
            conn.settimeout(5)
            try:
                answer = conn.recv(64)
            except OSError as exc:
                answer = repr(exc).encode()
        print("sent", port, len(frame), answer[:20])
"""


def attacker_program(ports: list[int], frames: list[bytes]) -> str:
    return SEND_AS_ATTACKER.format(frames=[f.hex() for f in frames], ports=ports)
