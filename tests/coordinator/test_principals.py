"""Who a session request comes from: the channel's verified principal, never a name alone (pure + files)."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.authorities.grants.operators import CredentialsError
from ouroactors.runtime.coordinator.principals import (
    PRINCIPALS_FILE,
    PrincipalCheck,
    Unverified,
    add_principal,
    decide,
    load_principals,
    local_principal,
    may_read,
)
from ouroactors.runtime.coordinator.resume import ActorKind, VerifiedActor

OWNER = "user:owner"
ALICE_TOKEN = "a" * 32
KNOWN = {"user:alice": hashlib.sha256(ALICE_TOKEN.encode()).hexdigest()}


def test_the_local_channel_vouches_for_its_owner_alone_without_a_token() -> None:
    assert decide(OWNER, None, channel_principal=OWNER, principals=KNOWN) == VerifiedActor(OWNER, ActorKind.PRINCIPAL)
    refused = decide("user:alice", None, channel_principal=OWNER, principals=KNOWN)
    assert isinstance(refused, Unverified) and "vouches only for 'user:owner'" in str(refused)


def test_another_principal_is_verified_by_its_token_and_by_nothing_else() -> None:
    assert decide("user:alice", ALICE_TOKEN, channel_principal=OWNER, principals=KNOWN) == \
        VerifiedActor("user:alice", ActorKind.PRINCIPAL)
    for claimed, token, principals in (("user:alice", "b" * 32, KNOWN),  # a wrong token
                                       ("user:bob", ALICE_TOKEN, KNOWN),  # alice's token for another name
                                       ("user:alice", ALICE_TOKEN, None),  # no readable principals.json
                                       (OWNER, ALICE_TOKEN, KNOWN)):  # the owner's name with a token it has not
        assert isinstance(decide(claimed, token, channel_principal=OWNER, principals=principals), Unverified)


@given(claimed=st.text(min_size=1, max_size=40), token=st.none() | st.text(min_size=1, max_size=64))
def test_nothing_but_the_owner_or_a_matching_token_is_ever_verified(claimed: str, token: str | None) -> None:
    verdict = decide(claimed, token, channel_principal=OWNER, principals=KNOWN)
    if isinstance(verdict, VerifiedActor):
        assert verdict.name == claimed
        assert (token is None and claimed == OWNER) or (claimed == "user:alice" and token == ALICE_TOKEN)


@pytest.mark.parametrize(("reader", "owner", "allowed"), [
    ("user:alice", "user:alice", True),  # its own
    ("user:alice", "user:bob", False),  # another's
    ("user:alice", OWNER, False),  # not even the data dir owner's
    (OWNER, "user:bob", True),  # the data dir's owner reads all (it can open the store itself)
    ("user:alice2", "user:alice", False),  # names are compared whole
])
def test_a_principal_reads_its_own_sessions_and_the_data_dirs_owner_reads_all(reader, owner, allowed) -> None:
    assert may_read(reader, owner, channel_principal=OWNER) is allowed


def test_a_reader_that_names_nobody_is_the_local_channels_own(tmp_path) -> None:
    check = PrincipalCheck(tmp_path)
    me = check.reader(None, None)
    assert isinstance(me, VerifiedActor) and me.name == local_principal()
    assert check.may_read(me, "user:anyone")
    assert isinstance(check.reader("user:alice", None), Unverified)
    alice = check.reader("user:alice", add_principal(tmp_path, "user:alice"))
    assert isinstance(alice, VerifiedActor)
    assert not check.may_read(alice, me.name) and check.may_read(alice, "user:alice")


def test_tokens_are_kept_as_digests_in_a_private_file(tmp_path) -> None:
    token = add_principal(tmp_path, "user:alice")
    path = tmp_path / PRINCIPALS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and token not in path.read_text()
    check = PrincipalCheck(tmp_path)
    assert check.channel_principal == local_principal(os.stat(tmp_path).st_uid)
    assert check.verify("user:alice", token) == VerifiedActor("user:alice", ActorKind.PRINCIPAL)
    renewed = add_principal(tmp_path, "user:alice")  # a new token replaces the old one
    assert isinstance(check.verify("user:alice", token), Unverified)
    assert check.verify("user:alice", renewed) == VerifiedActor("user:alice", ActorKind.PRINCIPAL)
    with pytest.raises(ValueError, match="principal"):
        add_principal(tmp_path, "user/alice")


def test_a_principals_file_others_may_read_or_that_is_not_json_verifies_no_token(tmp_path) -> None:
    token = add_principal(tmp_path, "user:alice")
    path = tmp_path / PRINCIPALS_FILE
    os.chmod(path, 0o644)
    with pytest.raises(CredentialsError, match="readable by others"):
        load_principals(tmp_path)
    assert isinstance(PrincipalCheck(tmp_path).verify("user:alice", token), Unverified)
    os.chmod(path, 0o600)
    path.write_text("{not json")
    assert isinstance(PrincipalCheck(tmp_path).verify("user:alice", token), Unverified)
    owner = PrincipalCheck(tmp_path).channel_principal  # the owner needs no file at all
    assert PrincipalCheck(tmp_path).verify(owner, None) == VerifiedActor(owner, ActorKind.PRINCIPAL)
