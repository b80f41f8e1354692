"""Every request a coordinator sends its runtime is stamped with that runtime's generation (``for_runtime``).

A runtime killed with SIGKILL frees its TCP port before its coordinator hears of it, and thespian addresses carry no
incarnation: whoever binds the port next receives what the coordinator sends the dead runtime. Stamped, another
runtime refuses it (``tests/execution/test_runtime_actor.py`` has the refusal on real processes); here, that the
coordinator's asks are stamped at all: the runtime it is attached to, one it names (a stray, a spare), and the open.
"""

from __future__ import annotations

from types import SimpleNamespace

from ouroactors.runtime.coordinator.calls import Ask
from ouroactors.runtime.coordinator.runtimes import RuntimeLink, _Attached
from ouroactors.runtime.execution.messages import AckOutput, SendText
from ouroactors.supervision.calls import Stamped


def link(attached: _Attached) -> SimpleNamespace:
    return SimpleNamespace(attached=attached, _watch=lambda key, generation: None)


def test_an_ask_to_the_attached_runtime_is_stamped_with_its_generation():
    attached = _Attached("addr-7", "runtime#7", "rt-7", 1_000_000_007)
    ask = RuntimeLink._runtime_ask(link(attached), SendText("hello"))  # type: ignore[arg-type]
    assert isinstance(ask, Ask) and ask.address == "addr-7"
    assert ask.message == Stamped(1_000_000_007, SendText("hello"))


def test_an_ask_to_a_named_runtime_carries_that_runtimes_generation_not_the_attached_ones():
    stray = _Attached("addr-3", "runtime#3", "", 1_000_000_003)
    ask = RuntimeLink._runtime_ask(link(_Attached("addr-7", "runtime#7", "rt-7", 1_000_000_007)),  # type: ignore[arg-type]
                                   AckOutput(4), to=stray)
    assert (ask.address, ask.message) == ("addr-3", Stamped(1_000_000_003, AckOutput(4)))
