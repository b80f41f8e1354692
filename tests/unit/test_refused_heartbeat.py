"""A StaleGeneration that comes back to an authority watching its holders: the expected news of a holder's death
when it comes from a watched holder's address (info, naming the holder and who refused), an unexpected refusal
(warning) from anyone else."""

from __future__ import annotations

import logging

from ouroactors.authorities.heartbeats import note_refused_heartbeat
from ouroactors.core.errors import StaleGeneration

LOG = logging.getLogger("ouroactors.test.heartbeats")


def test_a_watched_holder_refused_is_news_of_its_death_logged_at_info(caplog):
    with caplog.at_level(logging.INFO, logger=LOG.name):
        note_refused_heartbeat(LOG, "agent/workspace", "owner w-3", "addr", StaleGeneration("agent/grants", 7, 4))
    [record] = caplog.records
    assert record.levelno == logging.INFO
    assert "heartbeat to owner w-3 was refused by agent/grants" in record.getMessage()


def test_a_refusal_from_an_address_nobody_watches_is_a_warning_naming_sender_and_refusal(caplog):
    with caplog.at_level(logging.INFO, logger=LOG.name):
        note_refused_heartbeat(LOG, "agent/ledger", None, "addr-9", StaleGeneration("agent/x", 2, 1))
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "a refusal nothing here asked for, from addr-9" in record.getMessage()
