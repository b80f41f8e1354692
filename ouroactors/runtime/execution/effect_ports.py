"""How the live effect port (:mod:`.effects`) reaches the grants authority and the ledger: its two ports."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ...authorities.grants.rules import Request, Verdict
from ...authorities.ledger.domain import StartRequest


class GrantsPort(Protocol):
    """How the effect path reaches the grants authority (the runtime actor implements it with messages)."""

    async def decide(self, request: Request, root: str | None) -> Verdict: ...  # raises StaleGeneration

    async def approve(self, session: str, tool: str, arguments: dict[str, Any], call_id: str) -> tuple[bool, str]:
        """Park on a durable approval until it is answered: (approved, why)."""
        ...


class LedgerPort(Protocol):
    def get(self, effect_id: str) -> Any: ...
    def submit(self, requests: Sequence[Any], riders: Sequence[Any] = ()) -> list[Any]: ...
    def carry(self, riders: Sequence[Any]) -> None: ...
    def record_started(self, request: StartRequest, riders: Sequence[Any] = ()) -> Any: ...
    def record_denied(self, request: StartRequest, reason: str, riders: Sequence[Any] = ()) -> Any: ...
    def record_settled(self, effect_id: str, status: str, reason: str | None = None,
                       evidence: dict[str, Any] | None = None, by: str = "runner",
                       riders: Sequence[Any] = ()) -> Any: ...
    def record_cut_short(self, effect_id: str, reason: str) -> bool: ...


__all__ = ["GrantsPort", "LedgerPort"]
