"""Every request a coordinator sends its runtime is addressed to that runtime's generation (``for_runtime``).

A runtime killed with SIGKILL frees its TCP port before its coordinator hears of it, and thespian addresses carry no
incarnation: whoever binds the port next receives what the coordinator sends the dead runtime. Addressed, another
runtime refuses it (``tests/execution/test_runtime_actor.py`` has the refusal on real processes); here, that the
coordinator's asks are addressed at all: the runtime it is attached to, one it names (a stray, a spare), the open.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ouroactors.core.errors import StaleGeneration
from ouroactors.runtime.coordinator.calls import Ask
from ouroactors.runtime.coordinator.runtimes import RuntimeLink, RuntimeLost, _Attached
from ouroactors.runtime.execution.messages import AckOutput, OpenSession, SendText
from ouroactors.supervision.calls import Addressed


def link(attached: _Attached) -> SimpleNamespace:
    return SimpleNamespace(attached=attached, _watch=lambda key, generation: None)


def test_an_ask_to_the_attached_runtime_is_addressed_to_its_generation():
    attached = _Attached("addr-7", "runtime#7", "rt-7", 1_000_000_007)
    ask = RuntimeLink._runtime_ask(link(attached), SendText("hello"))  # type: ignore[arg-type]
    assert isinstance(ask, Ask) and ask.address == "addr-7"
    assert ask.message == Addressed(1_000_000_007, SendText("hello"))


def test_an_ask_to_a_named_runtime_carries_that_runtimes_generation_not_the_attached_ones():
    stray = _Attached("addr-3", "runtime#3", "", 1_000_000_003)
    ask = RuntimeLink._runtime_ask(link(_Attached("addr-7", "runtime#7", "rt-7", 1_000_000_007)),  # type: ignore[arg-type]
                                   AckOutput(4), to=stray)
    assert (ask.address, ask.message) == ("addr-3", Addressed(1_000_000_003, AckOutput(4)))


def test_an_open_refused_as_stale_is_a_runtime_gone_and_another_one_is_started():
    """The open of a just-started runtime is stamped too; answered ``StaleGeneration``, the address holds another
    actor (the runtime died and its port went to someone else): the start is lost like a runtime that died while
    opening (``RuntimeTaken``, a ``RuntimeLost``: the start loop starts another), not a failed command."""
    fake = SimpleNamespace(session_id="s1", myAddress="coordinator", record=None)
    fake._open = lambda info, request: RuntimeLink._open(fake, info, request)  # type: ignore[arg-type]
    info = SimpleNamespace(id="runtime#2", generation=1_000_000_002, address="addr-2")
    job = RuntimeLink._lease_and_open(fake, {}, info, _Attached("addr-2", "runtime#2", "", 1_000_000_002),  # type: ignore[arg-type]
                                      0, None, (), 0, None)
    ask = next(job)
    assert ask.address == "addr-2" and isinstance(ask.message, Addressed) and ask.message.generation == 1_000_000_002
    assert isinstance(ask.message.payload, OpenSession) and ask.message.payload.session_id == "s1"
    with pytest.raises(RuntimeLost, match="another actor answered at its address"):
        job.send(StaleGeneration("agent/execution/runtime#5", 1_000_000_005, 1_000_000_002))
