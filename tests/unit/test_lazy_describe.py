"""Thespian's message descriptions are rendered only when a log line is written (system._lazy_describe)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest
from thespian.system import transport
from thespian.system.utilis import thesplog, thesplog_control

from ouroactors.system import _lazy_describe


@dataclass
class Counted:
    """A message that counts how often it was rendered."""

    renders: list[int]

    def __str__(self) -> str:
        self.renders.append(1)
        return "Counted-message"


@pytest.fixture(autouse=True)
def installed() -> None:
    _lazy_describe.install()


def test_identify_renders_nothing_until_formatted() -> None:
    message = Counted([])
    intent = transport.TransmitIntent("addr", message)
    envelope = transport.ReceiveEnvelope("sender", message)
    described = [intent.identify(), envelope.identify()]
    assert message.renders == []  # what every send and receive paid before, for DEBUG lines nobody wrote
    assert "Counted-message" in "%s" % described[0]  # noqa: UP031 (thesplog formats with %)
    assert "Counted-message" in f"{described[1]}"
    assert len(message.renders) == 2
    str(described[0])
    assert len(message.renders) == 2  # rendered once, kept


def test_a_dropped_debug_line_renders_nothing_and_a_written_one_the_whole_text(tmp_path, monkeypatch) -> None:
    import thespian.system.utilis as utilis

    log = tmp_path / "thespian.log"
    monkeypatch.setattr(utilis, "_thesplog_file", str(log))
    saved = utilis._thesplog_control_settings
    message = Counted([])
    try:
        thesplog_control(logging.WARNING, False, 1 << 20)
        thesplog("actualTransmit of %s", transport.TransmitIntent("addr", message).identify(), level=logging.DEBUG)
        assert message.renders == [] and not log.exists()
        thesplog_control(logging.DEBUG, False, 1 << 20)
        thesplog("ACTOR got %s", transport.ReceiveEnvelope("sender", message).identify(), level=logging.DEBUG)
    finally:
        thesplog_control(*saved)
    assert "ACTOR got ReceiveEnvelope(from: sender" in log.read_text()
    assert "Counted-message" in log.read_text()


def test_str_of_an_envelope_is_still_text() -> None:
    envelope = transport.ReceiveEnvelope("sender", Counted([]))
    assert isinstance(str(envelope), str) and "Counted-message" in str(envelope)
    assert "Counted-message" in str(transport.TransmitIntent("addr", Counted([])))
