"""Authenticated, bounded frames for thespian's TCP transport.

Thespian frames a message as ``b"<length>>" + pickle`` and unpickles whatever arrives on any of
its listening sockets, so any local user who can connect to 127.0.0.1 could run code in the admin
or an actor. Every frame between the processes of one ouroactors system therefore carries an
HMAC-SHA256 tag computed with the system's secret::

    b"<length>>" + head (16) + tag (32) + pickle        length = 48 + len(pickle)

``head`` tags the declared length and is checked as soon as its 16 bytes arrive, before the rest
of the frame is read; ``tag`` (HMAC-SHA256 of the pickle) is checked, in constant time, before
the pickle is unpickled. A frame whose tags do not match, whose declared length exceeds the cap
(:data:`max_frame_bytes`, refused on the header) or whose header is not a length is dropped, its
connection closed, and the drop counted in the system's data dir (:func:`dropped`), which
``/metrics`` reports. Tags authenticate, they do not encrypt, and they do not stop the replay of a
frame captured on the wire: across machines, a trusted network or a tunnel is still needed.

Thespian's two acknowledgements (the pickles of ``"ACK"`` and ``"ACK+DATAERR"``) stay untagged:
they are recognised by comparing the bytes with the two known pickles, never by unpickling, so
they carry no code. A forged acknowledgement can at most make a sender believe a frame arrived,
which a peer that owns the sender's target port could achieve by accepting and dropping anyway.

Keys are per transport, chosen by admin port (:func:`key_for`): the process that starts a system
registers the system's key for its admin port before thespian forks the admin; the admin
(:func:`adopt`) keeps only its own key, which every actor inherits by fork. A thespian system
that ouroactors did not start (an admin port nobody registered, e.g. a benchmark's raw baseline)
keeps thespian's plain frames (:data:`RAW`), exactly as if the patch were absent.

This module is imported only by :mod:`._patches` (in every process of a system) and the handle.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import logging
import os
import pickle
from pathlib import Path
from typing import Any

from thespian.system.transport.streamBuffer import ReceiveBuffer, ackDataErrMsg, ackDataErrPacket, ackMsg, ackPacket
from thespian.system.utilis import thesplog

from . import _decoding

TAG_BYTES = 32
HEAD_BYTES = 16
PREFIX_BYTES = HEAD_BYTES + TAG_BYTES
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
MAX_HEADER_BYTES = 20  # "<length>>" of any length the cap allows, with room to spare
COUNTER_FILE = "frames_dropped.json"
REASONS = ("mac", "oversize", "malformed")


class _Raw:
    """The key of a transport of a thespian system ouroactors did not start: plain frames."""

    def __repr__(self) -> str:
        return "RAW"


RAW = _Raw()
Key = bytes | _Raw


def _max_frame_from_env() -> int:
    text = os.environ.get("OUROACTORS_MAX_FRAME_BYTES", "")
    if text.isdigit() and int(text) > TAG_BYTES:
        return int(text)
    return DEFAULT_MAX_FRAME_BYTES


max_frame_bytes = _max_frame_from_env()

# admin port -> (frame key, counter file); filled by the handle before thespian forks the admin.
_registry: dict[int, tuple[bytes, str | None]] = {}
# Set in an admin process (and inherited by its actors): the one key this process uses.
_own: tuple[Key, str | None] | None = None

_ACK_BODIES = {
    ackMsg[ackMsg.index(b">") + 1:]: ackPacket,
    ackDataErrMsg[ackDataErrMsg.index(b">") + 1:]: ackDataErrPacket,
}


def frame_key(secret: bytes) -> bytes:
    """The MAC key derived from a system secret (never the secret itself on the wire's side)."""
    return hmac.new(secret, b"ouroactors thespian frame v1", hashlib.sha256).digest()


def register(admin_port: int, secret: bytes, counter: str | os.PathLike[str] | None) -> None:
    """Frames of the system on ``admin_port`` are tagged with ``secret`` (call before it starts)."""
    _registry[admin_port] = (frame_key(secret), str(counter) if counter is not None else None)


def forget(admin_port: int) -> None:
    _registry.pop(admin_port, None)


def adopt(admin_port: int) -> None:
    """In a freshly forked admin: keep only this system's key (RAW if ouroactors did not start it)."""
    global _own
    _own = _registry.get(admin_port, (RAW, None))
    _registry.clear()


def auth_for(admin_port: int | None) -> tuple[Key, str | None]:
    """The key and drop counter a transport of the system on ``admin_port`` uses."""
    if _own is not None:
        return _own
    if admin_port is not None and admin_port in _registry:
        return _registry[admin_port]
    return (RAW, None)


_pads: dict[bytes, tuple[Any, Any]] = {}


def tag(key: bytes, body: bytes | memoryview) -> bytes:
    """HMAC-SHA256 of ``body`` (RFC 2104), from the key's inner and outer states computed once:
    2-3x cheaper per small frame than ``hmac.digest``, which redoes the key schedule every call."""
    pads = _pads.get(key)
    if pads is None:
        block = key.ljust(64, b"\0") if len(key) <= 64 else hashlib.sha256(key).digest().ljust(64, b"\0")
        pads = _pads[key] = (hashlib.sha256(bytes(b ^ 0x36 for b in block)),
                             hashlib.sha256(bytes(b ^ 0x5C for b in block)))
    inner, outer = pads[0].copy(), pads[1].copy()
    inner.update(body)
    outer.update(inner.digest())
    return outer.digest()


class FrameTooLarge(ValueError):
    """An outgoing message whose frame would exceed the cap every receiver enforces."""


_heads: dict[tuple[bytes, int], bytes] = {}


def head(key: bytes, length: int) -> bytes:
    """The tag of a frame's declared length, checked before any more of the frame is read."""
    cached = _heads.get((key, length))
    if cached is None:
        if len(_heads) > 4096:
            _heads.clear()
        cached = _heads[(key, length)] = tag(key, b"ouroactors frame length %d" % length)[:HEAD_BYTES]
    return cached


def encode(key: Key, body: bytes) -> bytes:
    """Frame ``body`` (a pickle) for the wire, tagged unless ``key`` is :data:`RAW`."""
    if isinstance(key, _Raw):
        return b"%d>" % len(body) + body
    refused = too_large(body)
    if refused is not None:
        raise refused
    length = PREFIX_BYTES + len(body)
    return b"".join((b"%d>" % length, head(key, length), tag(key, body), body))


def too_large(body: bytes) -> FrameTooLarge | None:
    """Why the frame of ``body`` (a pickle) would be refused by every receiver, or None if it would not."""
    if PREFIX_BYTES + len(body) <= max_frame_bytes:
        return None
    return FrameTooLarge(f"a message of {len(body)} pickled bytes exceeds the frame cap of {max_frame_bytes} bytes "
                         "(OUROACTORS_MAX_FRAME_BYTES)")


class FrameBuffer(ReceiveBuffer):
    """thespian's receive buffer, bounded, that unpickles only frames whose tags check out.

    ``auth`` is set by the transport that owns the buffer as soon as data arrives; a buffer whose
    transport never said which key applies rejects everything (fail closed). With a key, reads
    stop after the first :data:`HEAD_BYTES` of the body until the declared length's tag checks
    out, so a sender without the secret makes the receiver hold a few dozen bytes, not the cap.

    Every method of thespian's buffer is reimplemented (same attributes, same answers for
    well-formed input): this runs for every frame, and calling through to the parent cost more
    than the MAC.
    """

    def __init__(self, serializer: Any = pickle.loads) -> None:  # no super(): every field is set here
        self._buf = b""
        self._blen = 0
        self._size: int | None = None
        self._extra = b""
        # thespian's pickle.loads: a message naming a class this process cannot import arrives as Undecodable
        self._deserialize = _decoding.loads if serializer is pickle.loads else serializer
        self.auth: tuple[Key, str | None] | None = None
        self.rejected: str | None = None  # why the frame is refused, once known
        self._verdict: bool | None = None
        self._head_ok = False  # the declared length is authenticated (or needs no tag)
        self._ack: str | None = None
        self._counted = False

    def addMore(self, buf: bytes) -> None:
        if self.rejected is not None:
            return
        size = self._size
        if size is not None:
            want = size - self._blen
            if len(buf) <= want:
                self._buf += buf
                self._blen += len(buf)
            else:
                self._buf += buf[:want]
                self._blen = size
                self._extra += buf[want:]
        else:
            data = self._buf + buf if self._buf else buf
            mark = data.find(b">")
            if mark < 0:
                self._buf, self._blen = data, 1  # thespian's "something arrived" marker
                if len(data) > MAX_HEADER_BYTES:
                    self.rejected = "malformed"
                return
            try:
                size = int(data[:mark])
            except ValueError:
                self.rejected = "malformed"
                return
            if size < 0:
                self.rejected = "malformed"
                return
            if size > max_frame_bytes:
                self.rejected = "oversize"
                return
            self._size = size
            self._buf = data[mark + 1: mark + 1 + size]
            self._blen = len(self._buf)
            if len(data) > mark + 1 + size:
                self._extra = data[mark + 1 + size:]
        if not self._head_ok:
            self.check_head()

    def check_head(self) -> bool:
        """Check the declared length's tag once its bytes are here; False once the frame is refused."""
        if self._head_ok or self.rejected is not None:
            return self.rejected is None
        auth, size = self.auth, self._size
        if auth is None or size is None:
            return True
        key = auth[0]
        if isinstance(key, _Raw) or size < PREFIX_BYTES:
            self._head_ok = True  # plain thespian frames, or too short to be anything but an ack
            return True
        if self._blen < HEAD_BYTES:
            return True
        if hmac.compare_digest(self._buf[:HEAD_BYTES], head(key, size)):
            self._head_ok = True
            return True
        self.rejected = "mac"
        return False

    def is_empty(self) -> bool:
        return self._blen == 0 and self._size is None

    def isDone(self) -> bool:
        return self.rejected is not None or (self._size is not None and self._blen == self._size)

    def remainingAmount(self) -> int:
        if self.rejected is not None:
            return 0
        size = self._size
        if size is None:
            return 20
        if not self._head_ok and size >= PREFIX_BYTES and self._blen < HEAD_BYTES:
            return HEAD_BYTES - self._blen
        return size - self._blen

    def removeExtra(self) -> None:
        self._extra = b""

    def accept(self) -> bool:
        """Whether the completed frame may be unpickled; a refusal is counted once."""
        verdict = self._verdict
        if verdict is None:
            if self.rejected is None and (self._size is None or self._blen != self._size):
                return False  # not complete: nothing to judge yet
            verdict = self._verdict = self._judge()
            if not verdict and not self._counted and self.auth is not None:
                self._counted = True
                _count(self.auth[1], self.rejected or "malformed", len(self._buf))
        return verdict

    def _judge(self) -> bool:
        if self.rejected is not None:
            return False
        buf = self._buf
        if len(buf) < TAG_BYTES:
            self._ack = _ACK_BODIES.get(buf)
            if self._ack is not None:
                return True
        if self.auth is None:
            self.rejected = "mac"
            return False
        key = self.auth[0]
        if isinstance(key, _Raw):
            return True
        view = memoryview(buf)
        if len(buf) <= PREFIX_BYTES or not self.check_head() or not hmac.compare_digest(
                view[HEAD_BYTES:PREFIX_BYTES], tag(key, view[PREFIX_BYTES:])):
            self.rejected = "mac"
            return False
        return True

    def completed(self) -> Any:
        if not self.accept():
            return None
        if self._ack is not None:
            return self._ack, self._extra
        assert self.auth is not None
        if isinstance(self.auth[0], _Raw):
            return self._deserialize(self._buf), self._extra
        return self._deserialize(memoryview(self._buf)[PREFIX_BYTES:]), self._extra

    def __str__(self) -> str:
        return f"FrameBuffer({self._blen}/{self._size} bytes{', refused: ' + self.rejected if self.rejected else ''})"


def _count(counter: str | None, reason: str, size: int) -> None:
    thesplog("dropped an inbound frame (%s, %d bytes) before unpickling it", reason, size, level=logging.WARNING)
    if counter is None:
        return
    with contextlib.suppress(OSError, ValueError):
        fd = os.open(counter, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with os.fdopen(os.dup(fd), "r+") as handle:
                text = handle.read()
                counts = json.loads(text) if text.strip() else {}
                counts[reason] = int(counts.get(reason, 0)) + 1
                handle.seek(0)
                handle.truncate()
                handle.write(json.dumps(counts, sort_keys=True))
        finally:
            os.close(fd)


def dropped(data_dir: str | os.PathLike[str]) -> dict[str, int]:
    """Inbound frames dropped so far by the system of ``data_dir``, by reason (all reasons listed)."""
    counts = dict.fromkeys(REASONS, 0)
    path = Path(data_dir) / COUNTER_FILE
    with contextlib.suppress(OSError, ValueError):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            with os.fdopen(os.dup(fd)) as handle:
                text = handle.read()
        finally:
            os.close(fd)
        for reason, value in (json.loads(text) if text.strip() else {}).items():
            if isinstance(reason, str) and isinstance(value, int):
                counts[reason] = value
    return counts


def reset_counter(data_dir: str | os.PathLike[str]) -> None:
    """A new run of a system starts its drop counters at zero (Prometheus counters reset too)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(Path(data_dir) / COUNTER_FILE)
