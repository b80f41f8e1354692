"""The grants database's records decoded one by one: a bad one is named (database and key) and why, never guessed."""

from __future__ import annotations

import dataclasses

import msgpack
import pytest

from ouroactors.authorities.grants import approvals as book
from ouroactors.authorities.grants.records import decode_record, unreadable_for
from ouroactors.core.errors import CorruptRecord

GARBAGE = b"\xc1\xc1garbage"


def approval(approval_id: str = "a1") -> book.Approval:
    return book.request([], approval_id=approval_id, session_id="s1", tool="shell", call_digest="d" * 64,
                        state_version=3, answerers=("op",), deadline_ns=10_000, now_ns=0, max_pending=8,
                        arguments={"command": "git push"}, policy="p" * 64)


def stored(a: book.Approval) -> dict:
    return msgpack.unpackb(msgpack.packb(dataclasses.asdict(a)), raw=False)


def test_good_records_decode_as_the_actor_wrote_them():
    a = approval()
    assert decode_record(b"approval/a1", msgpack.packb(dataclasses.asdict(a))) == ("approval", "a1", a)
    assert decode_record(b"posture/s1", msgpack.packb("plan")) == ("posture", "s1", "plan")
    assert decode_record(b"rules/user", msgpack.packb(["allow:Read(**)"])) == ("rules", "user", ("allow:Read(**)",))
    assert decode_record(b"rules/session/s1", msgpack.packb([])) == ("rules", "session/s1", ())
    old = stored(a)
    del old["policy"], old["arguments"]  # recorded before these fields were kept
    assert decode_record(b"approval/a1", msgpack.packb(old))[2] == dataclasses.replace(a, policy=None, arguments=None)


@pytest.mark.parametrize("key", [b"approval/a1", b"posture/s1", b"rules/user", b"policy"])
def test_bytes_that_are_not_msgpack_are_named_with_their_key(key):
    with pytest.raises(CorruptRecord) as bad:
        decode_record(key, GARBAGE)
    assert bad.value.where == "grants/" + key.decode() and "not msgpack" in bad.value.detail
    assert f"grants/{key.decode()}" in str(bad.value)


def _broken(**changes) -> bytes:
    data = stored(approval())
    for field, value in changes.items():
        if value is KeyError:
            del data[field]
        else:
            data[field] = value
    return msgpack.packb(data)


@pytest.mark.parametrize(("key", "value", "why"), [
    (b"posture/s1", msgpack.packb("anything-goes"), "posture"),
    (b"posture/s1", msgpack.packb(3), "posture"),
    (b"rules/user", msgpack.packb("allow:Read(**)"), "list of texts"),
    (b"rules/user", msgpack.packb([1, 2]), "list of texts"),
    (b"approval/a1", msgpack.packb(["not", "a", "map"]), "a map"),
    (b"approval/a1", _broken(status="approved-by-me"), "status"),
    (b"approval/a1", _broken(status=KeyError), "status"),
    (b"approval/a1", _broken(state_version="3"), "state_version"),
    (b"approval/a1", _broken(deadline_ns=True), "deadline_ns"),
    (b"approval/a1", _broken(session_id=None), "session_id"),
    (b"approval/a1", _broken(answerers="op"), "answerers"),
    (b"approval/a1", _broken(refusals=[1]), "refusals"),
    (b"approval/a1", _broken(extra=1), "extra"),
    (b"approval/a2", _broken(), "not the key's"),  # a record moved under another id
])
def test_records_of_the_wrong_shape_are_corrupt_and_say_what_is_wrong(key, value, why):
    with pytest.raises(CorruptRecord) as bad:
        decode_record(key, value)
    assert bad.value.where == "grants/" + key.decode() and why in bad.value.detail


def test_a_key_that_is_not_utf8_is_named_as_well_as_it_can_be():
    with pytest.raises(CorruptRecord, match="not UTF-8") as bad:
        decode_record(b"approval/\xff", msgpack.packb({}))
    assert bad.value.where.startswith("grants/approval/")


@pytest.mark.parametrize(("corrupt", "session", "affecting"), [
    ({}, "s1", []),
    ({"approval/a1": "x"}, "s1", []),  # an approval changes no decision (it fails closed on its own)
    ({"policy": "x"}, "s1", []),  # rewritten from the configuration at start
    ({"posture/s1": "x"}, "s1", ["posture/s1"]),
    ({"posture/s1": "x"}, "s2", []),
    ({"rules/user": "x"}, "s2", ["rules/user"]),
    ({"rules/workspace": "x"}, "s2", ["rules/workspace"]),
    ({"rules/session/s1": "x"}, "s1", ["rules/session/s1"]),
    ({"rules/session/s1": "x"}, "s2", []),
    ({"rules/session": "x"}, "s1", []),  # session rules without a session are ignored anyway
    ({"rules/user": "x", "posture/s1": "y"}, "s1", ["posture/s1", "rules/user"]),
])
def test_which_corrupt_records_could_change_a_sessions_decisions(corrupt, session, affecting):
    assert unreadable_for(corrupt, session) == affecting
