"""The tool-set version a session pins: a digest of what its enabled tools are, as this code defines them.

A session's history means what it means under the tools it ran with: the schema the model was shown, the
effect class grants judged, the ledger kind, fingerprint fields, reconciler and compensation of each. Code whose
``edit`` takes other arguments, or whose ``http`` is judged as another effect, would continue a recorded session
under different rules without anyone noticing. So, like the workflow (:mod:`.versions`), the tool set is pinned
at creation and checked wherever the session continues:

* at creation ``pins.tool_set`` ``default`` becomes :func:`digest` of the session's enabled tools (a caller may
  also name that digest itself; any other value is refused, naming the allowed ones);
* the coordinator refuses a message to a session whose pin is not what this code's tools digest to, recovery
  parks such a session with the reason, and a runtime will not open it (:class:`ToolSetChanged`).

A session created before tool sets were pinned says ``default`` and is continued as before.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from ...core.codec import digest_of
from .errors import RuntimeRefusal

__all__ = ["DEFAULT", "PREFIX", "ToolSetChanged", "check", "digest", "resolve"]

DEFAULT = "default"
PREFIX = "tools/"


class ToolSetChanged(RuntimeRefusal):
    """A session is pinned to a tool set whose definition this code does not have."""

    def __init__(self, session_id: str, pinned: str, current: str) -> None:
        self.session_id, self.pinned, self.current = session_id, pinned, current
        super().__init__(f"session {session_id!r} is pinned to tool set {pinned!r}; this code's tools for it digest "
                         f"to {current!r} (a tool's schema, effect or ledger rules changed): continue it with code "
                         "that has its tools")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.session_id, self.pinned, self.current))


def digest(names: Sequence[str]) -> str:
    """The version of the tools ``names`` as this code defines them (unknown names are the config's to refuse)."""
    return _digest(tuple(names))


@functools.lru_cache(maxsize=64)  # the same code gives the same digest: computed once per tool set and process
def _digest(names: tuple[str, ...]) -> str:
    from . import tools as registry  # imported here: the tools pull in grants and the sandbox

    described = []
    for name in names:
        tool = registry.TOOLS[name]
        spec = tool.spec()
        described.append([spec.name, spec.description, spec.parameters, tool.effect.value, tool.ledger_kind,
                          list(tool.fingerprint_fields), tool.reconciler, tool.compensation])
    return PREFIX + digest_of(described)[:32]


def resolve(session_id: str, pinned: str, names: Sequence[str]) -> str:
    """The pin a new session keeps: ``default`` becomes the digest; the digest itself stays; anything else is
    :class:`ValueError` naming what is allowed."""
    current = digest(names)
    if pinned in (DEFAULT, current):
        return current
    raise ValueError(f"session {session_id!r}: pins.tool_set: got {pinned!r}; allowed: 'default', {current!r} "
                     "(the digest of its enabled tools as this code defines them)")


def check(session_id: str, pinned: str, names: Sequence[str]) -> None:
    """Refuse (:class:`ToolSetChanged`) unless the session's pin is what this code's tools digest to."""
    if pinned == DEFAULT:  # created before tool sets were pinned
        return
    current = digest(names)
    if pinned != current:
        raise ToolSetChanged(session_id, pinned, current)
