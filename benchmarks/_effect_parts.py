"""Where one tool call's effect path spends its time, by part (``bench_effect_path --parts``).

The path's own functions are wrapped with ``perf_counter_ns`` timers for one extra pass of calls (each wrapper costs
about a microsecond, so the pass is not one of the measured samples), and the LMDB commit is timed on its own
inside the storage commit contract. A part's figure is its **mean per call of the path** (a commit's, per commit):
parts nest (the ledger's submit holds its commit), so they do not add up to the whole. cProfile was no use here: it
inflates a path of ~2,700 small Python calls several times over and flattens what it measures.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ouroactors.authorities.grants import inline
from ouroactors.authorities.ledger import direct, store
from ouroactors.authorities.storage import commit
from ouroactors.runtime.execution import effects, journal
from ouroactors.runtime.execution.tools import shell

# (owner, attribute, label): what is timed, as the path calls it
PARTS: tuple[tuple[Any, str, str], ...] = (
    (effects.LiveEffects, "_tool_context", "tool context (validated once, copied per call)"),
    (shell.ShellTool, "grant_request", "the shell tool's grant request (the command parsed, paths resolved)"),
    (inline.InlineGrants, "decide", "inline grants decision (policy read, rules evaluated)"),
    (effects, "permission_entry", "the decision's ledger entry built"),
    (direct.LedgerWriter, "submit", "ledger submit: start or settlement, commit included"),
    (store.LedgerStore, "_apply_one", "  the ledger's decision and entry encoding, per op"),
    (journal.Journal, "put_staged", "  the journal's puts riding in the ledger's transaction"),
    (journal.Journal, "stage", "journal record staged (encoded, hashed later), per record"),
)
COMMIT = "txn.commit() (LMDB: pages written, two flushes), per commit"


@contextlib.contextmanager
def timed_parts() -> Iterator[Counter[str]]:
    """While open, every :data:`PARTS` function and the contract's ``txn.commit()`` add their ns to the counter
    (``<label>`` total, ``#<label>`` calls); everything is put back on exit."""
    spent: Counter[str] = Counter()
    saved: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)
        saved.append((owner, name, original))

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter_ns()
            try:
                return original(*args, **kwargs)
            finally:
                spent[label] += time.perf_counter_ns() - began
                spent["#" + label] += 1

        setattr(owner, name, timed)

    for owner, name, label in PARTS:
        wrap(owner, name, label)
    # the commit itself: the contract's write, recompiled with its txn.commit() timed (the module keeps its own)
    source = inspect.getsource(commit.write).replace(
        "        txn.commit()\n",
        "        _began = _clock(); txn.commit(); _spent[_LABEL] += _clock() - _began; _spent['#' + _LABEL] += 1\n")
    namespace = {**vars(commit), "_clock": time.perf_counter_ns, "_spent": spent, "_LABEL": COMMIT}
    exec(compile(source, commit.__file__, "exec"), namespace)
    users: list[tuple[Any, str, Any]] = [(module, "write", module.write) for module in (store, commit)
                                         if getattr(module, "write", None) is commit.write]
    for module, name, original in users:
        saved.append((module, name, original))
        setattr(module, name, namespace["write"])
    try:
        yield spent
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


def means_us(spent: Counter[str], calls: int) -> list[tuple[str, float, int]]:
    """(label, mean µs per call of the path — or per commit, per op, per record where the label says so, count)."""
    out = []
    for label in [COMMIT, *(label for _, _, label in PARTS)]:
        count = spent.get("#" + label, 0)
        if not count:
            continue
        per = count if "per " in label else calls
        out.append((label, spent[label] / per / 1e3, count))
    return out


__all__ = ["COMMIT", "PARTS", "means_us", "timed_parts"]
