"""TEST-ONLY: a session runtime with a planted honesty bug, for proving the runtime workload catches it.

:class:`RunsExistingStarts` is the real runtime, except that its effect path treats an ``existing`` start like a
``created`` one (and skips the look-up that reports a known effect first): a call the ledger already holds (a
turn sent again to a replaced runtime) is run again. The
http tool sends the same idempotency key, so the world logs a second delivery of the key — invariant 2 ("no
effect delivered twice") broken on purpose. The patch is made in the runtime's own process, at its start.
"""

from __future__ import annotations

from typing import Any

from ouroactors.runtime.execution import effects, honesty
from ouroactors.runtime.execution.runtime import Runtime

PLANTED_RUNTIME = "tests.faults.planted_runtime:RunsExistingStarts"


def _runs_existing(answer: object, decisions: int = 1) -> honesty.StartStep:
    step = honesty.on_start_answer(answer, decisions)
    if step.action is honesty.StartAction.NOT_AGAIN:
        return honesty.StartStep(honesty.StartAction.RUN, "planted bug: existing run again", step.status)
    return step


class RunsExistingStarts(Runtime):
    def on_start(self, *args: Any, **kwargs: Any) -> None:
        effects.on_start_answer = _runs_existing  # type: ignore[assignment]  # this process only
        super().on_start(*args, **kwargs)
        self.ledger.get = lambda effect_id: None  # type: ignore[method-assign]  # and skip the "known" check
