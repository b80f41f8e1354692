"""Fuzz every authority's door: random instances of every message type, against the real agent tree.

Issue 12 §3. The agent tree (``supervision_trees/agent.toml``) runs on real processes; hypothesis
builds instances of every request type of storage, ledger, grants and workspace with random field
values — None, huge and negative ints, inf/nan, 600-character and surrogate strings, bytes, wrong
types, nested junk, nested records built without validation (as unpickling builds them) — and
sends each, stamped with the authority's generation (some unstamped or badly stamped). Then:

* every answer is a typed refusal (or a harmless read answer), never a crash or a silence;
* no authority restarted: the same pids, generations and restart counts as before;
* nothing durable changed: ledger entries, postures, rules, approvals and leases are as before.

A message whose fields all pass the door of a type that would change state (a well-formed
``Decide`` is recorded in the ledger, by design) is not sent: the point is bad input.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ouroactors.authorities.grants import messages as grants
from ouroactors.authorities.grants.rules import Effect, Request
from ouroactors.authorities.ledger import messages as ledger
from ouroactors.authorities.ledger.domain import StartRequest, fingerprint
from ouroactors.authorities.storage.actor import Backup, Reopen
from ouroactors.authorities.workspace import messages as workspace
from ouroactors.core.boundary import check_message
from ouroactors.core.errors import ActorCrashed, AskTimeout, BadRequest, NoSuchActor, OuroactorsError

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]

AGENT = Path(__file__).resolve().parents[2] / "supervision_trees" / "agent.toml"
AUTHORITY_OF: dict[type, str] = {
    **{t: "agent/grants" for t in grants.PROTOCOL},
    **{t: "agent/ledger" for t in (ledger.RecordStarted, ledger.RecordDenied, ledger.RecordSettled,
                                   ledger.OperatorSettle, ledger.RecordBatch, ledger.GetEntry, ledger.ListEntries,
                                   ledger.WatchRunner)},
    **{t: "agent/workspace" for t in workspace.PROTOCOL},
    Backup: "agent/storage", Reopen: "agent/storage",
}
# Well-formed instances of these change nothing durable (reads, or refused for an unknown id):
# they are sent too, to exercise the handlers behind the door.
HARMLESS_WHEN_VALID = {grants.WaitApproval, grants.AnswerApproval, grants.ConsumeApproval, grants.ListApprovals,
                       ledger.RecordSettled, ledger.OperatorSettle, ledger.GetEntry, ledger.ListEntries,
                       workspace.Release, workspace.CheckFence, workspace.CheckRoot, workspace.CleanupWorktree,
                       grants.ReviewApprovals}  # a review denies only what no durable session waits on: none here

READS = {grants.ListApprovals, ledger.GetEntry, ledger.ListEntries}  # may come unstamped: they change nothing

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([2**63, -(2**63) - 1, 2**70, 0, -1, 10**12]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([math.inf, -math.inf, math.nan, 1e12, -0.0]),
    st.text(max_size=20), st.sampled_from(["s" * 600, "é" * 300, "x\udcff", "\x00", "", "../..", "/etc/passwd"]),
    st.binary(max_size=40), st.just(b"\x00" * 600),
)
junk = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple),
    st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner, max_size=4),
    st.frozensets(st.integers(), max_size=3),
), max_leaves=12)
names = st.one_of(st.sampled_from(["s1", "e1", "approval-000000000000", "lease-1"]), st.text(min_size=1, max_size=12))


@st.composite
def unvalidated_request(draw: st.DrawFn) -> Request:
    """A grants Request as unpickling may build it: no __post_init__, any field values."""
    request = Request.__new__(Request)
    fields = {"principal": draw(st.one_of(names, junk)), "tool": draw(st.one_of(st.just("Bash"), junk)),
              "effect": draw(st.one_of(st.sampled_from(list(Effect)), junk)),
              "paths": draw(st.one_of(st.just(("/tmp/x",)), junk)), "command": draw(st.one_of(st.none(), junk)),
              "domains": draw(st.one_of(st.just(()), junk))}
    object.__setattr__(request, "__dict__", fields)
    return request


@st.composite
def unvalidated_start(draw: st.DrawFn) -> StartRequest:
    """A StartRequest built without validation (model_construct), some fields junk."""
    good = {"effect_id": "fz-1", "kind": "tool_call", "idempotency_key": "fz-1",
            "fingerprint": fingerprint("tool_call", {}), "principal": "s1", "session_id": "s1", "turn_id": None,
            "call_id": None, "authority": {}, "grant": None, "cause": None}
    bad = draw(st.lists(st.sampled_from(sorted(good)), min_size=1, max_size=3, unique=True))
    return StartRequest.model_construct(**{k: (draw(junk) if k in bad else v) for k, v in good.items()})


def field_values(cls: type) -> st.SearchStrategy[Any]:
    nested: dict[str, st.SearchStrategy[Any]] = {
        "request": st.one_of(unvalidated_request(), unvalidated_start(), junk),
        "items": st.one_of(st.lists(st.one_of(junk, unvalidated_start().map(ledger.RecordStarted)), max_size=3)
                           .map(tuple), junk),
    }
    return st.fixed_dictionaries({f.name: st.one_of(nested.get(f.name, junk), names, junk)
                                  for f in dataclasses.fields(cls)})


@st.composite
def messages(draw: st.DrawFn) -> tuple[type, Any]:
    cls = draw(st.sampled_from(sorted(AUTHORITY_OF, key=lambda t: t.__name__)))
    message = cls.__new__(cls)
    object.__setattr__(message, "__dict__", draw(field_values(cls)))  # as unpickled: no __init__ ran
    return cls, message


def durable_state(system: Any) -> dict[str, Any]:
    status = system.ask("agent/grants", "status")
    return {
        "ledger": [entry.model_dump() for entry in system.ask("agent/ledger", ledger.ListEntries(limit=100_000))],
        "postures": status["postures"], "rules": status["rules"],
        "approvals": system.ask("agent/grants", grants.ListApprovals()),
        "leases": system.ask("agent/workspace", "leases", stamp=system.child_info("agent/workspace").generation),
    }


def liveness(system: Any) -> dict[str, tuple[Any, ...]]:
    out = {}
    for path in ("agent/storage", "agent/ledger", "agent/grants", "agent/workspace"):
        info = system.child_info(path)
        out[path] = (info.pid, info.generation, info.restarts, info.status)
    return out


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from ouroactors.system.config import load_tree
    from ouroactors.system.handle import ActorSystem
    from ouroactors.testing.leaks import assert_nothing_left

    system = ActorSystem.start("multiproc", data_dir=tmp_path_factory.mktemp("fuzz") / "data")
    try:
        system.start_tree(load_tree(str(AGENT)).tree)
        yield system
    finally:
        system.shutdown()
        assert_nothing_left(system)


@pytest.fixture(scope="module")
def baseline(agent: Any) -> dict[str, Any]:
    return {"live": liveness(agent), "durable": durable_state(agent),
            "generations": {p: v[1] for p, v in liveness(agent).items()}}


def classify(message: Any) -> str:
    try:
        check_message(message)
    except BadRequest:
        return "bad"
    except Exception as exc:  # the checker itself must never fail otherwise
        raise AssertionError(f"check_message raised {type(exc).__name__}: {exc}") from exc
    return "harmless" if type(message) in HARMLESS_WHEN_VALID else "mutating"


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=messages(), stamping=st.sampled_from(["current", "current", "current", "none", "junk"]))
def test_random_messages_never_crash_an_authority_or_change_anything(agent, baseline, case, stamping):
    cls, message = case
    kind = classify(message)
    event(f"{kind} {stamping}")
    if kind == "mutating" and stamping == "current":
        return  # well-formed and state-changing: not bad input
    path = AUTHORITY_OF[cls]
    stamp = {"current": baseline["generations"][path], "none": None, "junk": 2**70}[stamping]
    try:
        answer = agent.ask(path, message, timeout=10.0, stamp=stamp)
    except (ActorCrashed, AskTimeout, NoSuchActor) as exc:
        pytest.fail(f"{cls.__name__} crashed or silenced {path}: {exc!r}")
    except OuroactorsError as exc:
        answer = exc
    if stamping == "current" and kind == "bad":
        assert isinstance(answer, BadRequest), (message, answer)
    if stamping == "junk" or (stamping == "none" and cls not in READS):
        assert isinstance(answer, OuroactorsError), (message, answer)  # stale or unstamped: refused


def test_after_the_fuzz_no_authority_restarted_and_nothing_durable_changed(agent, baseline):
    """Runs after the fuzz (same module, same system)."""
    assert liveness(agent) == baseline["live"]
    assert durable_state(agent) == baseline["durable"]
    assert not [e for e in agent.events.all() if e.kind in ("exited", "restarting", "generation_changed")]
