"""Issue 11 §1: no local user can make a process of the system unpickle a frame it did not tag.

The attack: thespian unpickles every frame that reaches any of its listening sockets (the admin's
and one per actor process), and 127.0.0.1 is reachable by every local user. So another user
(``nobody``) sends a pickle whose unpickling creates a file to every listening port of a running
system. A control run against a plain thespian system shows the same frame does run there.
"""

from __future__ import annotations

import os
import pickle
import socket
import time
from pathlib import Path

import pytest
from thespian.actors import ActorSystem as ThespianSystem
from thespian.system.transport.streamBuffer import toSendBuffer

from ouroactors import supervisor, worker
from ouroactors.system import _frames, _patches
from ouroactors.system.handle import free_port

from ..actor.helpers import ECHO, wait_until
from .frames_support import attacker_program, forged_frames, group_pids, listeners_of

pytestmark = pytest.mark.multiproc


def _tree() -> object:
    return supervisor("root", [worker("a", ECHO), worker("b", ECHO), supervisor("sub", [worker("c", ECHO)])])


def _system_ports(system) -> dict[int, list[tuple[str, int]]]:
    ports = {pid: listeners_of(pid) for pid in group_pids(system.pgid)}
    return {pid: found for pid, found in ports.items() if found}


def _wait_dropped(system, reason: str, at_least: int) -> dict[str, int]:
    wait_until(lambda: system.dropped_frames()[reason] >= at_least, timeout=10, what=f"{at_least} {reason} drops")
    return system.dropped_frames()


def test_the_forged_frame_is_a_working_exploit(tmp_path):
    target = tmp_path / "control"
    frame = forged_frames(target)[0]
    pickle.loads(frame[frame.index(b">") + 1:])
    assert target.exists()  # unpickling it is enough to run code


@pytest.mark.slow
def test_a_plain_thespian_system_runs_the_forged_frame_the_control(tmp_path, as_other_user):
    """Without ouroactors' secret (an admin port nobody registered) thespian's frames are plain:
    the attack below succeeds here, so its failure against an ouroactors system is the fix's doing."""
    _patches.install()
    port = free_port()
    raw = ThespianSystem("multiprocTCPBase", {"Admin Port": port}, transientUnique=True)
    try:
        target = tmp_path / "ran-in-raw-admin"
        result = as_other_user(attacker_program([port], forged_frames(target)[:1]))
        assert result.returncode == 0, result.stderr
        wait_until(target.exists, timeout=10, what="the raw admin to unpickle the forged frame")
    finally:
        raw.shutdown()


@pytest.mark.slow
def test_forged_frames_from_another_user_run_nowhere_and_are_counted(actor_system, tmp_path, as_other_user):
    system = actor_system
    system.start_tree(_tree())
    assert system.ask("root/sub/c", "before") == "before"
    listeners = _system_ports(system)
    ports = sorted({port for found in listeners.values() for _, port in found})
    actor_pids = [system.child_info(p).pid for p in ("root/a", "root/b", "root/sub", "root/sub/c")]
    assert system.admin_port in ports
    assert all(pid in listeners for pid in actor_pids), "every actor process listens"
    assert len(ports) >= len(actor_pids) + 2  # + the admin and the tree host
    before = system.dropped_frames()["mac"]

    target = tmp_path / "pwned"
    frames = forged_frames(target)
    result = as_other_user(attacker_program(ports, frames))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("sent") == len(ports) * len(frames)  # every port was reached

    counts = _wait_dropped(system, "mac", before + len(ports) * len(frames))
    assert counts["mac"] == before + len(ports) * len(frames)
    assert not target.exists(), "a forged pickle ran inside the system"
    assert system.ask("root/sub/c", "after") == "after"
    assert system.ask("root/a", "after") == "after"
    assert _system_ports(system).keys() == listeners.keys()  # nothing crashed or restarted


@pytest.mark.slow
def test_an_untagged_frame_from_the_same_user_is_dropped(actor_system, tmp_path):
    system = actor_system
    system.start_tree(_tree())
    pid = system.child_info("root/a").pid
    [(_, port)] = listeners_of(pid)
    target = tmp_path / "same-user"
    # A well-formed thespian frame addressed like a real message, from a process that lacks the secret.
    frame = toSendBuffer((system.resolve("root/b"), pickle.loads(pickle.dumps("hello"))))
    frame_with_pickle = forged_frames(target)[0]
    for data in (frame, frame_with_pickle):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(data)
            conn.settimeout(5)
            assert conn.recv(64) == b""  # closed without an acknowledgement
    _wait_dropped(system, "mac", 2)
    assert not target.exists()
    assert system.ask("root/a", "still") == "still"
    # The starting process's own endpoint checks tags too (it reads its socket while it asks).
    [(_, own_port)] = listeners_of(os.getpid())
    with socket.create_connection(("127.0.0.1", own_port), timeout=5) as conn:
        conn.sendall(frame_with_pickle)
    wait_until(lambda: system.ask("root/a", "again") == "again" and system.dropped_frames()["mac"] >= 3,
               timeout=10, what="the starting process to read and drop the frame while it asks")
    assert not target.exists()


@pytest.mark.slow
def test_an_oversized_frame_is_refused_before_it_is_read(actor_system):
    system = actor_system
    system.start_tree(_tree())
    [(_, port)] = listeners_of(system.child_info("root/a").pid)
    declared = _frames.max_frame_bytes + 1
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"%d>" % declared + b"x" * 1000)  # the header and a little: nothing like the length
        conn.settimeout(5)
        started = time.monotonic()
        assert conn.recv(64) == b""  # the receiver closed on the header, it did not wait for the body
        assert time.monotonic() - started < 5
    counts = _wait_dropped(system, "oversize", 1)
    assert counts["mac"] == 0
    # A header that never ends is refused too (it used to be buffered without bound).
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"1" * 4096)
        conn.settimeout(5)
        with pytest.raises(ConnectionResetError):
            while conn.recv(64):
                pass
            raise ConnectionResetError  # an orderly close is a refusal too
    _wait_dropped(system, "malformed", 1)
    # Under the cap, a length whose tag is wrong is refused after its 16 bytes, not after 10 MiB.
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"%d>" % (10 * 1024 * 1024) + b"\0" * 16)
        conn.settimeout(5)
        assert conn.recv(64) == b""
    _wait_dropped(system, "mac", 1)
    assert system.ask("root/a", "fine") == "fine"


def test_an_outgoing_message_over_the_cap_is_refused_by_the_sender(monkeypatch):
    monkeypatch.setattr(_frames, "max_frame_bytes", 1024)
    with pytest.raises(_frames.FrameTooLarge, match="exceeds the frame cap of 1024 bytes"):
        _frames.encode(b"k" * 32, b"x" * 2000)
    assert _frames.encode(_frames.RAW, b"x" * 2000).startswith(b"2000>")  # plain thespian is untouched


def test_the_tag_is_hmac_sha256():
    import hashlib
    import hmac

    for key in (b"k" * 32, b"short", b"x" * 64, b"long" * 40):
        for body in (b"", b"a", pickle.dumps(list(range(1000)))):
            assert _frames.tag(key, body) == hmac.new(key, body, hashlib.sha256).digest()
            assert _frames.tag(key, memoryview(b"pad" + body)[3:]) == hmac.new(key, body, hashlib.sha256).digest()


def test_frames_round_trip_and_a_flipped_bit_is_dropped():
    key = _frames.frame_key(b"s" * 32)
    body = pickle.dumps(("addr", {"n": 1}))
    wire = _frames.encode(key, body)
    good = _frames.FrameBuffer()
    good.auth = (key, None)
    good.addMore(wire)
    assert good.completed() == (("addr", {"n": 1}), b"")
    tampered = bytearray(wire)
    tampered[-1] ^= 1
    bad = _frames.FrameBuffer()
    bad.auth = (key, None)
    bad.addMore(bytes(tampered))
    assert bad.isDone() and bad.completed() is None and bad.rejected == "mac"
    unkeyed = _frames.FrameBuffer()  # a buffer no transport claimed: fail closed
    unkeyed.addMore(wire)
    assert unkeyed.completed() is None


def test_reads_stop_at_the_length_tag_until_it_checks_out():
    key = _frames.frame_key(b"s" * 32)
    buffer = _frames.FrameBuffer()
    buffer.auth = (key, None)
    buffer.addMore(b"%d>" % (1024 * 1024))
    assert buffer.remainingAmount() == _frames.HEAD_BYTES  # not a MiB: only the length's tag
    buffer.addMore(_frames.head(key, 1024 * 1024))
    assert buffer.remainingAmount() == 1024 * 1024 - _frames.HEAD_BYTES  # authenticated length
    forged = _frames.FrameBuffer()
    forged.auth = (key, None)
    forged.addMore(b"%d>" % (1024 * 1024) + b"\1" * _frames.HEAD_BYTES)
    assert forged.rejected == "mac" and forged.isDone() and forged.remainingAmount() == 0


def test_acknowledgements_are_recognised_by_their_bytes_not_unpickled():
    from thespian.system.transport.streamBuffer import ackMsg

    buffer = _frames.FrameBuffer()
    buffer.auth = (_frames.frame_key(b"s" * 32), None)
    buffer.addMore(ackMsg)
    assert buffer.completed() == ("ACK", b"")


def test_secret_file_is_private_and_never_in_the_environment(actor_system):
    system = actor_system
    secret = (system.data_dir / "secret").read_text().strip()
    assert (system.data_dir / "secret").stat().st_mode & 0o777 == 0o600
    for pid in group_pids(system.pgid):
        assert secret not in Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        assert secret not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    assert secret not in "".join(os.environ.values())


def test_metrics_report_dropped_frames_by_reason():
    from ouroactors.system.metrics import render

    text = render([], [], 1, {"mac": 3, "oversize": 1, "malformed": 0})
    assert 'ouroactors_frames_dropped_total{reason="mac"} 3' in text
    assert 'ouroactors_frames_dropped_total{reason="oversize"} 1' in text
    assert "ouroactors_frames_dropped_total" not in render([], [], 1)  # the simple base has no frames
