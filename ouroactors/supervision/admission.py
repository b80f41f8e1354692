"""Which of a worker's requests reach its handler: generation stamps and the declared protocol, checked at the door.

A mixin of :class:`~.worker.Worker`, kept apart from the shell's dispatch because it is the worker's boundary: every
field of a request in its ``protocol`` is checked before any handler runs (:func:`~ouroactors.core.boundary.
check_message`), a stamped request (:class:`~.protocol.Stamped`) must name the generation this incarnation serves,
and with ``stamped_only`` a protocol request that changes something must carry one. A refused request is answered
with the reason (``BadRequest``, ``StaleGeneration``, ``StampRequired``) and changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.boundary import check_message
from ..core.errors import BadRequest, StaleGeneration, StampRequired
from .calls import Addressed, generation_problem
from .protocol import Stamped

REFUSED = object()  # what :meth:`Admission._admitted` returns for a request it answered with a refusal


class Admission:
    """See the module docstring."""

    if TYPE_CHECKING:  # what the worker provides
        path: str
        generation: Any  # Owned[int | None] on the worker
        protocol: tuple[type, ...]
        stamped_only: bool
        reads: tuple[type, ...]
        _generation_pending: bool

        def _answer_now(self, sender: Any, answer: Any) -> None: ...

    def _admitted(self, message: Any, sender: Any) -> Any:
        """The request the handler gets (a stamped one's payload), or :data:`REFUSED` once the refusal is answered."""
        if isinstance(message, Stamped):
            if self._bad_generation(message, sender):
                return REFUSED
            if self._generation_pending or message.generation != self.generation:
                expected = None if self._generation_pending else self.generation
                self._answer_now(sender, StaleGeneration(self.path, expected, message.generation))
                return REFUSED
            message = message.payload
        elif self.stamped_only and isinstance(message, self.protocol) and type(message) not in self.reads:
            self._answer_now(sender, StampRequired(self.path, self.generation))
            return REFUSED
        if self.protocol and isinstance(message, self.protocol):
            try:  # a subclass would reach a handler by the MRO without its own annotations checked
                if type(message) not in self.protocol:
                    raise BadRequest(type(message).__name__, "", "is a subclass of a request type, not one")
                message = check_message(message)
            except BadRequest as bad:
                self._answer_now(sender, bad)
                return REFUSED
        return message

    def _bad_generation(self, envelope: Addressed | Stamped, sender: Any) -> bool:
        """Refuse ``envelope`` if its generation is no 64-bit int (:func:`.calls.generation_problem`)."""
        problem = generation_problem(envelope.generation)
        if problem is not None:
            self._answer_now(sender, BadRequest(type(envelope).__name__, "generation", problem,
                                                repr(envelope.generation)[:80]))
        return problem is not None


__all__ = ["REFUSED", "Admission"]
