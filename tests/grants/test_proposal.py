"""``grants.proposal.shown``: what an approval keeps of a call's arguments — whole, or a bounded view binding all."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from ouroactors.authorities.grants.messages import MAX_ARGUMENTS_BYTES
from ouroactors.authorities.grants.proposal import ELIDED, _has_marker, shown
from ouroactors.core.codec import _pack, digest_of


def size(value):
    return len(_pack(value, "arguments"))


def test_arguments_within_the_bound_are_kept_whole():
    small = {"path": "NOTES.md", "content": "x" * 1500, "_judged_against": {"files": 1, "sha256": "0" * 64}}
    assert shown(small) is small


def test_a_large_write_keeps_its_small_fields_and_a_digest_of_its_content():
    content = "line of generated text\n" * 4000
    view = shown({"path": "BIG.md", "content": content})
    assert view["path"] == "BIG.md"
    elided = view["content"][ELIDED]
    assert elided == {"bytes": len(content.encode()), "sha256": hashlib.sha256(content.encode()).hexdigest(),
                      "head": content[:160]}
    assert size(view) <= MAX_ARGUMENTS_BYTES


def test_the_view_binds_every_byte_one_changed_byte_is_another_call():
    content = "a" * 10_000
    other = content[:5000] + "b" + content[5001:]
    assert digest_of(["write", shown({"content": content})]) != digest_of(["write", shown({"content": other})])
    assert shown({"content": content}) == shown({"content": content})  # the same arguments, the same view


def test_too_many_fields_for_even_the_view_elide_the_whole():
    many = {f"k{i}": "v" * 300 for i in range(200)}
    view = shown(many)
    packed = _pack(many, "arguments")
    assert view == {ELIDED: {"bytes": len(packed), "sha256": hashlib.sha256(packed).hexdigest(), "head": ""}}


def test_nested_lists_and_text_that_is_not_ascii():
    args = {"edits": [{"old": "ä" * 500, "new": "日本" * 300}, {"old": "x", "new": "y"}]}
    view = shown(args)
    assert view["edits"][1] == {"old": "x", "new": "y"}
    assert view["edits"][0]["old"][ELIDED]["bytes"] == 1000 and size(view) <= MAX_ARGUMENTS_BYTES


json_values = st.recursive(st.none() | st.booleans() | st.integers(-2**62, 2**62) | st.text(max_size=400),
                           lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=20), inner,
                                                                                       max_size=8), max_leaves=40)


@given(st.dictionaries(st.text(min_size=1, max_size=20), json_values, max_size=10))
def test_every_view_fits_the_grants_door(arguments):
    view = shown(arguments)
    assert size(view) <= MAX_ARGUMENTS_BYTES
    if size(arguments) <= MAX_ARGUMENTS_BYTES and not _has_marker(arguments):
        assert view == arguments


def test_a_call_that_spells_out_another_calls_view_does_not_share_its_approval():
    """Attack: a model gives an ``http`` call whose ``json_body`` is, literally, the view of a large call the
    operator approved. Both had one digest, so the approval of one could decide the other. A literal marker key is
    escaped (one more ``$``), so the two views and digests differ; arguments without one are kept as they were."""
    large = {"json_body": "x" * 5000}
    view = shown(large)
    forged = {"json_body": view["json_body"]}
    assert shown(forged) != view and digest_of(["http", shown(forged)]) != digest_of(["http", view])
    assert shown(forged) == {"json_body": {"$" + ELIDED: view["json_body"][ELIDED]}}
    deeper = {"a": [{"$$elided": 1}]}  # already escaped once: escaped again, still told apart from the one above
    assert shown(deeper) == {"a": [{"$$$elided": 1}]} and shown({"a": [{"$elided": 1}]}) == {"a": [{"$$elided": 1}]}
    assert shown({"path": "x", "$other": 1}) == {"path": "x", "$other": 1}  # other keys untouched
