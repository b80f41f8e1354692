"""The selector thespian's TCP transport loop uses (see ``ouroactors.system._selector``)."""

from __future__ import annotations

import errno
import os
import selectors
import socket

import pytest

from ouroactors.system import _patches, _selector


def test_the_transport_builds_poll_selectors_once_the_patches_are_installed():
    from thespian.system.transport import TCPTransport

    _patches.install()
    assert TCPTransport.selectors.DefaultSelector is _selector.PollSelector
    assert selectors.DefaultSelector is not _selector.PollSelector  # the stdlib module is left alone


def test_ready_descriptors_are_reported_as_by_the_stdlib_selector():
    left, right = socket.socketpair()
    with left, right:
        sel = _selector.PollSelector()
        sel.register(left.fileno(), selectors.EVENT_READ)
        sel.register(right.fileno(), selectors.EVENT_WRITE)
        assert [(key.fd, events) for key, events in sel.select(0)] == [(right.fileno(), selectors.EVENT_WRITE)]
        right.send(b"x")
        ready = {key.fd: events for key, events in sel.select(1.0)}
        assert ready[left.fileno()] == selectors.EVENT_READ
        sel.close()


def test_a_descriptor_that_is_not_open_raises_ebadf_as_epolls_register_does():
    """thespian's loop finds a closed watched descriptor by the EBADF epoll raised (and ``_check_fd`` probes so)."""
    read_end, write_end = os.pipe()
    os.close(write_end)
    os.close(read_end)  # read_end is now a number no descriptor has
    sel = _selector.PollSelector()
    sel.register(read_end, selectors.EVENT_READ)
    with pytest.raises(OSError) as raised:
        sel.select(0)
    assert raised.value.errno == errno.EBADF
    sel.close()


def test_a_descriptor_listed_twice_is_one_registration_with_both_events_as_select_took_it():
    """thespian 4.0.1's loop may list one socket for reading twice, or for reading and writing: ``select.select``
    took that, a selector's ``register`` raised ``KeyError`` and the actor process died."""
    left, right = socket.socketpair()
    with left, right:
        sel = _selector.PollSelector()
        sel.register(left.fileno(), selectors.EVENT_READ)
        sel.register(left.fileno(), selectors.EVENT_READ)  # twice for reading: no error
        sel.register(left.fileno(), selectors.EVENT_WRITE)  # and for writing: both events
        assert sel.get_key(left.fileno()).events == selectors.EVENT_READ | selectors.EVENT_WRITE
        assert [(key.fd, events) for key, events in sel.select(0)] == [(left.fileno(), selectors.EVENT_WRITE)]
        right.send(b"x")
        ready = {key.fd: events for key, events in sel.select(1.0)}
        assert ready[left.fileno()] == selectors.EVENT_READ | selectors.EVENT_WRITE
        sel.close()
    with pytest.raises(KeyError):  # the stdlib's, for comparison: what the transport loop met
        stdlib = selectors.PollSelector()
        stdlib.register(0, selectors.EVENT_READ)
        stdlib.register(0, selectors.EVENT_WRITE)
