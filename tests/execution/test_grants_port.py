"""The runtime's grants port (:class:`~ouroactors.runtime.execution.live.ActorGrants`): each request goes tagged
with a ref of its own and only the answer carrying it resumes the call — a late answer to a request that gave up
is dropped, never taken for the next request's (which matching by order alone did)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from thespian.actors import PoisonMessage

from ouroactors.authorities.grants.rules import Decision, Effect, Request, Verdict
from ouroactors.runtime.execution.live import ActorGrants
from ouroactors.supervision.calls import Tagged, TaggedAnswer

REQUEST = Request(tool="shell", effect=Effect.EXECUTE, principal="s1", command="true")


def port(sent: list[tuple[str, Any]]) -> ActorGrants:
    return ActorGrants(lambda ref, payload: sent.append((ref, payload)), "s1", lambda request, root: ("decide", root))


def test_only_the_answer_with_the_requests_ref_resumes_it() -> None:
    sent: list[tuple[str, Any]] = []
    grants = port(sent)
    allow, deny = Verdict(Decision.ALLOW, "rule"), Verdict(Decision.DENY, "late")
    got: list[Verdict] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            async def ask() -> None:
                got.append(await grants.decide(REQUEST, "/ws"))

            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            (ref, payload), = sent
            assert payload == ("decide", "/ws")
            assert grants.answer(TaggedAnswer(ref + "-other", deny))  # another request's: dropped
            assert not grants.answer(deny)  # a bare message is no answer: left to the runtime's handlers
            await trio.testing.wait_all_tasks_blocked()
            assert got == []
            assert grants.answer(TaggedAnswer(ref, allow))

    trio.run(main)
    assert got == [allow]


def test_a_late_answer_to_a_request_that_timed_out_is_not_the_next_ones() -> None:
    sent: list[tuple[str, Any]] = []
    grants = port(sent)
    first_verdict, second_verdict = Verdict(Decision.DENY, "first, late"), Verdict(Decision.ALLOW, "second")

    async def main() -> Verdict:
        with pytest.raises(trio.TooSlowError):
            await grants._ask(("first",), timeout=0.01)
        async with trio.open_nursery() as nursery:
            out: list[Verdict] = []

            async def second() -> None:
                out.append(await grants.decide(REQUEST, None))

            nursery.start_soon(second)
            await trio.testing.wait_all_tasks_blocked()
            (first_ref, _), (second_ref, _) = sent
            assert first_ref != second_ref
            assert grants.answer(TaggedAnswer(first_ref, first_verdict))  # the first's answer comes now: dropped
            await trio.testing.wait_all_tasks_blocked()
            assert out == []
            grants.answer(TaggedAnswer(second_ref, second_verdict))
        return out[0]

    assert trio.run(main) == second_verdict


def test_a_request_that_came_back_unhandled_ends_its_call() -> None:
    sent: list[tuple[str, Any]] = []
    grants = port(sent)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            async def ask() -> None:
                with pytest.raises(TypeError, match="PoisonMessage"):
                    await grants.decide(REQUEST, None)

            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            (ref, payload), = sent
            assert grants.answer(PoisonMessage(Tagged(ref, payload)))

    trio.run(main)
