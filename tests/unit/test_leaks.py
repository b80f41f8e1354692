"""The leak check tells a port this system left open from the same port number taken again by another group."""

from __future__ import annotations

import os
import socket

from ouroactors.testing.leaks import held_by_group, listener_pids


def test_a_listener_is_found_by_port_and_judged_by_its_session() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        holders = listener_pids(port)
    assert os.getpid() in holders
    assert held_by_group(holders, os.getsid(0)) and not held_by_group(holders, os.getsid(0) + 100_000)  # its session
    assert held_by_group(set(), 12345)  # nothing found: counted as held (strict)


def test_a_port_with_no_listening_socket_has_no_listen_inode_even_while_a_connection_uses_it() -> None:
    from ouroactors.testing.leaks import listen_inodes

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        assert listen_inodes(port)  # listening: its socket is there
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = listener.accept()
            with accepted:
                client_port = client.getsockname()[1]
                # the client's own port number is in use by a connection, but nothing listens on it: a probe
                # that reaches it (a TCP self-connect) must not pass for a listener left behind
                assert listen_inodes(client_port) == set()


def test_a_gone_group_whose_port_number_another_group_took_is_passed_at_once_not_after_the_timeout() -> None:
    """The group is gone, so who listens on its old port is someone else: no reason to wait out the timeout."""
    import time
    from types import SimpleNamespace

    from ouroactors.testing.leaks import assert_nothing_left

    with socket.socket() as listener:  # this process (the test's group) took the port number
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        gone = SimpleNamespace(pgid=os.getsid(0) + 100_000, lineage_mark=None,  # no such group, no mark
                               admin_port=listener.getsockname()[1])
        began = time.monotonic()
        assert_nothing_left(gone, timeout=5.0)  # type: ignore[arg-type]
        assert time.monotonic() - began < 2.5


def test_a_program_that_left_the_session_but_carries_the_mark_is_a_leak_named_in_the_failure() -> None:
    import subprocess
    from types import SimpleNamespace

    import pytest

    from ouroactors.core import procs
    from ouroactors.testing.leaks import assert_nothing_left

    env = {**os.environ, procs.SYSTEM_MARK: "5:55"}
    escaped = subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)
    try:
        gone = SimpleNamespace(pgid=None, lineage_mark="5:55", admin_port=None)
        with pytest.raises(AssertionError, match=rf"{escaped.pid} \(sleep 300\)"):
            assert_nothing_left(gone, timeout=0.2)  # type: ignore[arg-type]
    finally:
        escaped.kill()
        escaped.wait()
    assert_nothing_left(SimpleNamespace(pgid=None, lineage_mark="5:55", admin_port=None))  # type: ignore[arg-type]
