"""Tagged requests at a worker's door (:class:`~ouroactors.supervision.calls.Tagged`): whatever a worker answers a
bare request with — its answer, a refusal, a stale stamp, an answer given later by a group commit — it answers a
tagged one with inside :class:`~ouroactors.supervision.calls.TaggedAnswer` carrying the request's ref, so an asker
that gave up on a request never takes its late answer for the next one's. A tag with a bad ref is refused bare, and
a tagged request meets every check a bare one does. Real multiproc system, real ledger on LMDB."""

from __future__ import annotations

import pytest
from thespian.actors import WakeupMessage

from ouroactors import supervisor, worker
from ouroactors.authorities.asking import current_generation
from ouroactors.authorities.ledger.actor import ListEntries, RecordSettled, RecordStarted
from ouroactors.authorities.ledger.domain import StartRequest, fingerprint
from ouroactors.core.errors import BadRequest, StaleGeneration
from ouroactors.supervision.calls import Stamped, Tagged, TaggedAnswer

pytestmark = pytest.mark.multiproc


@pytest.fixture
def ledger(actor_system):
    actor_system.start_tree(supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
    ]))
    return actor_system


def _raw(system, message):
    """The ledger's answer as it came (the client unwraps nothing it does not know)."""
    return system.ask("agent/ledger", message, 10.0)


def test_a_tagged_request_is_answered_with_its_ref_whatever_the_answer(ledger):
    gen = current_generation(ledger, "agent/ledger")
    before = ledger.child_info("agent/ledger")
    listed = _raw(ledger, Tagged("t-list", Stamped(gen, ListEntries())))
    assert listed == TaggedAnswer("t-list", [])
    stale = _raw(ledger, Tagged("t-stale", Stamped((gen or 0) + 1, ListEntries())))
    assert isinstance(stale, TaggedAnswer) and stale.ref == "t-stale" and isinstance(stale.value, StaleGeneration)
    bad = _raw(ledger, Tagged("t-bad", Stamped(gen, RecordSettled(None, "ok"))))  # type: ignore[arg-type]
    assert isinstance(bad, TaggedAnswer) and isinstance(bad.value, BadRequest) and bad.value.field == "effect_id"
    for field, value in (("since_seq", 2**70), ("since_seq", float("nan")), ("session", "s" * 600)):
        huge = _raw(ledger, Tagged("t-huge", Stamped(gen, ListEntries(**{field: value}))))
        assert isinstance(huge, TaggedAnswer) and isinstance(huge.value, BadRequest) and huge.value.field == field
    # a start is answered after its group commit, not by the handler: still with its ref
    request = StartRequest(effect_id="e-1", kind="http_request", idempotency_key="e-1",
                           fingerprint=fingerprint("http_request", {"n": 1}), principal="s1")
    started = _raw(ledger, Tagged("t-start", Stamped(gen, RecordStarted(request))))
    assert isinstance(started, TaggedAnswer) and started.ref == "t-start" and started.value.answer == "created"
    after = ledger.child_info("agent/ledger")
    assert (after.generation, after.restarts, after.pid) == (before.generation, before.restarts, before.pid)


@pytest.mark.parametrize("ref", [None, 7, "", "r" * 129])
def test_a_tag_whose_ref_cannot_be_trusted_is_refused_bare(ledger, ref):
    gen = current_generation(ledger, "agent/ledger")
    with pytest.raises(BadRequest) as caught:
        _raw(ledger, Tagged(ref, Stamped(gen, ListEntries())))  # type: ignore[arg-type]
    assert (caught.value.message, caught.value.field) == ("Tagged", "ref")


def test_a_tagged_request_meets_every_check_a_bare_one_does(ledger):
    """A tag is no way past the door: not for a timer of the worker's own (forged, it could resume a pending ask as
    timed out or end the worker), not for a tag inside a tag."""
    before = ledger.child_info("agent/ledger")
    forged = _raw(ledger, Tagged("t-timer", WakeupMessage(None)))
    assert isinstance(forged, TaggedAnswer) and isinstance(forged.value, BadRequest)
    assert forged.value.message == "WakeupMessage"
    with pytest.raises(BadRequest, match="tagged already"):
        _raw(ledger, Tagged("t-outer", Tagged("t-inner", ListEntries())))
    after = ledger.child_info("agent/ledger")
    assert (after.restarts, after.pid) == (before.restarts, before.pid)
