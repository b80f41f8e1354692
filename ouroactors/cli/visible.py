"""Text from elsewhere, made safe to put on an operator's terminal.

What the CLI prints is mostly written by someone else: a model's tool call (the command an operator is asked to
approve), a tool's output, a path in the workspace, an actor's crash message. A terminal obeys control characters in
it: ``ESC [2K`` and a carriage return erase what came before on the line, so ``rm -rf ~ <ESC>[2K<CR>echo hi`` reads
``echo hi`` in an approval; OSC sequences set the window title or, in some terminals, the clipboard; and Unicode
direction overrides (U+202E …) show a command's characters in another order than the one that runs.

:func:`visible` writes each such character as its escape (``\\x1b``, ``\\u202e``), so that what is shown is what is
there, character for character — and so is every other character that prints nothing by itself (a zero-width
space in ``r<ZWSP>m``, a no-break space, an unassigned code point). Tabs and newlines stay: they only lay text out.
Every console the CLI makes applies it to every string it renders (:func:`.common.make_console`); what the CLI writes
without rich goes through it too.
"""

from __future__ import annotations


def visible(text: str, *, keep: str = "\t\n") -> str:
    """``text`` with every character that is not printable (Python's ``str.isprintable``: controls, format
    characters such as direction overrides and zero-width spaces, separators other than a space, unassigned and
    private code points) written as its escape (``\\x1b``, ``\\r``, ``\\u202e``), but those in ``keep`` (by
    default tabs and newlines, which only lay text out; ``keep=""`` for text that must stay on one line)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in keep else ch.encode("unicode_escape").decode("ascii")
                   for ch in text)


__all__ = ["visible"]
