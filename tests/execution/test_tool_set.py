"""The tool-set pin (pure): a digest of the enabled tools as this code defines them, checked on continuing."""

from __future__ import annotations

import pytest

from ouroactors.runtime.execution import tool_set
from ouroactors.runtime.execution.tools import TOOLS

ALL = ("read", "write", "edit", "list", "shell", "http")


def test_the_digest_names_the_tools_and_their_order_and_nothing_else_moves_it() -> None:
    assert tool_set.digest(ALL) == tool_set.digest(list(ALL))
    assert tool_set.digest(ALL).startswith(tool_set.PREFIX)
    assert len({tool_set.digest(ALL), tool_set.digest(ALL[:-1]), tool_set.digest(("read",)),
                tool_set.digest(("write", "read")), tool_set.digest(("read", "write"))}) == 5


@pytest.mark.parametrize(("attribute", "value"), [("description", "something else"), ("ledger_kind", "other"),
                                                  ("fingerprint_fields", ("command",)), ("reconciler", "m:f"),
                                                  ("compensation", "undo")])
def test_a_tool_whose_definition_changed_has_another_digest(monkeypatch, attribute, value) -> None:
    pinned = tool_set.digest(ALL)
    monkeypatch.setattr(type(TOOLS["shell"]), attribute, value)
    tool_set._digest.cache_clear()
    try:
        assert tool_set.digest(ALL) != pinned
        with pytest.raises(tool_set.ToolSetChanged, match="is pinned to tool set"):
            tool_set.check("s1", pinned, ALL)
    finally:
        monkeypatch.undo()
        tool_set._digest.cache_clear()
    tool_set.check("s1", pinned, ALL)  # the same code again: continued


def test_resolve_takes_default_or_the_digest_and_refuses_any_other_label() -> None:
    current = tool_set.digest(ALL)
    assert tool_set.resolve("s1", "default", ALL) == current == tool_set.resolve("s1", current, ALL)
    with pytest.raises(ValueError, match=r"pins\.tool_set: got 'v2'; allowed: 'default', 'tools/"):
        tool_set.resolve("s1", "v2", ALL)
    with pytest.raises(ValueError):
        tool_set.resolve("s1", tool_set.digest(ALL[:2]), ALL)  # another tool set's digest
    tool_set.check("s1", "default", ALL)  # a session from before tool sets were pinned is continued
