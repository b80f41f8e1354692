"""Every error type the framework answers with must cross a process boundary intact."""

from __future__ import annotations

import inspect
import pickle

import pytest

import ouroactors.authorities.ledger.domain as ledger_domain
import ouroactors.authorities.workspace.leases as leases
import ouroactors.authorities.workspace.paths as paths
import ouroactors.authorities.workspace.worktrees as worktrees
import ouroactors.core.codec as codec
import ouroactors.core.errors as errors
import ouroactors.runtime.sandbox as sandbox

MODULES = (errors, codec, ledger_domain, leases, paths, worktrees, sandbox)


def sample_args(cls: type[Exception]) -> list[object]:
    params = [p for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
              if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    out: list[object] = []
    for p in params:
        if p.name == "holders":
            out.append([leases.Lease("l", "/r", "exclusive", "s", "o", 1, 0, "x")])
        elif p.name == "problems":
            out.append([("children[0].id", "is required")])
        elif "int" in str(p.annotation):
            out.append(7)
        else:
            out.append("text")
    return out


ERRORS = [cls for module in MODULES for _, cls in inspect.getmembers(module, inspect.isclass)
          if issubclass(cls, Exception) and cls.__module__ == module.__name__]


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_error_round_trips_through_pickle(cls):
    error = cls(*sample_args(cls))
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls and str(copy) == str(error) and copy.__dict__ == error.__dict__
