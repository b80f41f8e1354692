"""Asking an authority from outside the tree (the CLI, an operator's script, a test).

Authorities serve only requests stamped with their current generation (generation fencing is not
opt-in). A consumer inside the tree stamps with the generation it was started against; a caller
outside looks the generation up from the authority's supervisor and stamps with that. If the
authority restarts or changes generation between the look-up and the ask, the answer is
:class:`~ouroactors.core.errors.StaleGeneration`: the caller looks up again and asks again, once —
it never acts on an answer from a generation it did not look up.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..core.errors import StaleGeneration


class _System(Protocol):
    def child_info(self, path: str) -> Any: ...

    def ask(self, path: str, message: Any, timeout: float = 5.0, *, stamp: int | None = None) -> Any: ...


def current_generation(system: _System, path: str) -> int | None:
    """The generation of the authority at ``path`` now (from its supervisor)."""
    generation: int | None = system.child_info(path).generation
    return generation


def ask_authority(system: _System, path: str, message: Any, timeout: float = 5.0) -> Any:
    """Ask ``path`` stamped with the generation looked up just before; errors are raised."""
    for attempt in range(2):
        try:
            return system.ask(path, message, timeout, stamp=current_generation(system, path))
        except StaleGeneration:
            if attempt:
                raise
    raise AssertionError("unreachable")


class StampedRef:
    """An authority's address and generation, looked up once: asks go straight to it, stamped.

    For callers that ask one authority many times (benchmarks, scripts). A stale answer (the
    authority restarted or changed generation) looks both up again and asks once more.
    """

    def __init__(self, system: Any, path: str) -> None:
        self.system, self.path = system, path
        self._bind()

    def _bind(self) -> None:
        self.ref = self.system.ref(self.path)
        self.generation = current_generation(self.system, self.path)

    def ask(self, message: Any, timeout: float = 5.0) -> Any:
        try:
            return self.ref.ask(message, timeout, stamp=self.generation)
        except StaleGeneration:
            self._bind()
            return self.ref.ask(message, timeout, stamp=self.generation)
