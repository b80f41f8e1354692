"""What ``ouroactors grants list`` prints of a stored rule: its control characters escaped, the rest as stored."""

from __future__ import annotations

from ouroactors.cli.visible import visible


def _shown(text: str) -> str:
    return visible(text, keep="")  # a rule's line: one line


def test_a_stored_rules_control_characters_reach_no_terminal_as_themselves() -> None:
    # rules stored before new ones with control characters were refused are still listed, escaped
    assert _shown("allow:Bash(echo \x1b[2J)") == "allow:Bash(echo \\x1b[2J)"
    assert _shown("deny:Bash(rm\t-rf *)\x7f") == "deny:Bash(rm\\t-rf *)\\x7f"
    assert _shown("allow:Read(notes/é ü.md)") == "allow:Read(notes/é ü.md)"  # printable text as it is
