"""ouroactors: OTP-grade supervision trees for Python actors on thespian.

The public API is re-exported here; the modules behind it are implementation. The names are resolved on
first use (PEP 562), so ``import ouroactors`` — and every ``ouroactors`` CLI call — does not pay for
thespian, pydantic and the supervision machinery until something needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core import faults as faults
    from .core.errors import ActorCrashed as ActorCrashed
    from .core.errors import ActorCrashedBefore as ActorCrashedBefore
    from .core.errors import ActorStopped as ActorStopped
    from .core.errors import ActorStopping as ActorStopping
    from .core.errors import ActorSystemError as ActorSystemError
    from .core.errors import AlreadyPresent as AlreadyPresent
    from .core.errors import AlreadyStarted as AlreadyStarted
    from .core.errors import AskTimeout as AskTimeout
    from .core.errors import ChildNotFound as ChildNotFound
    from .core.errors import ChildRestarting as ChildRestarting
    from .core.errors import ChildRunning as ChildRunning
    from .core.errors import MaxChildren as MaxChildren
    from .core.errors import NoSuchActor as NoSuchActor
    from .core.errors import OuroactorsError as OuroactorsError
    from .core.errors import SimpleOneForOneOnly as SimpleOneForOneOnly
    from .core.errors import SpecError as SpecError
    from .core.errors import StaleGeneration as StaleGeneration
    from .core.errors import StartFailed as StartFailed
    from .core.errors import StartInterrupted as StartInterrupted
    from .core.errors import SupervisorError as SupervisorError
    from .core.errors import UnhandledMessage as UnhandledMessage
    from .core.errors import UnsendableAnswer as UnsendableAnswer
    from .supervision.child_info import ChildInfo as ChildInfo
    from .supervision.events import Event as Event
    from .supervision.reasons import ExitKind as ExitKind
    from .supervision.reasons import ExitReason as ExitReason
    from .supervision.specs import ChildSpec as ChildSpec
    from .supervision.specs import SupervisorFlags as SupervisorFlags
    from .supervision.specs import check_childspecs as check_childspecs
    from .supervision.specs import supervisor as supervisor
    from .supervision.specs import worker as worker
    from .supervision.supervisor import Supervisor as Supervisor
    from .supervision.worker import IGNORE as IGNORE
    from .supervision.worker import Worker as Worker
    from .system.client import ActorRef as ActorRef
    from .system.client import SystemClient as SystemClient
    from .system.handle import ActorSystem as ActorSystem

# public name -> (module relative to this package, attribute; None for the module itself)
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "faults": (".core.faults", None),
    "ActorCrashed": (".core.errors", "ActorCrashed"),
    "ActorCrashedBefore": (".core.errors", "ActorCrashedBefore"),
    "UnsendableAnswer": (".core.errors", "UnsendableAnswer"),
    "ActorStopped": (".core.errors", "ActorStopped"),
    "ActorStopping": (".core.errors", "ActorStopping"),
    "ActorSystemError": (".core.errors", "ActorSystemError"),
    "AlreadyPresent": (".core.errors", "AlreadyPresent"),
    "AlreadyStarted": (".core.errors", "AlreadyStarted"),
    "AskTimeout": (".core.errors", "AskTimeout"),
    "ChildNotFound": (".core.errors", "ChildNotFound"),
    "ChildRestarting": (".core.errors", "ChildRestarting"),
    "ChildRunning": (".core.errors", "ChildRunning"),
    "MaxChildren": (".core.errors", "MaxChildren"),
    "NoSuchActor": (".core.errors", "NoSuchActor"),
    "OuroactorsError": (".core.errors", "OuroactorsError"),
    "SimpleOneForOneOnly": (".core.errors", "SimpleOneForOneOnly"),
    "SpecError": (".core.errors", "SpecError"),
    "StaleGeneration": (".core.errors", "StaleGeneration"),
    "StartFailed": (".core.errors", "StartFailed"),
    "StartInterrupted": (".core.errors", "StartInterrupted"),
    "SupervisorError": (".core.errors", "SupervisorError"),
    "UnhandledMessage": (".core.errors", "UnhandledMessage"),
    "ChildInfo": (".supervision.child_info", "ChildInfo"),
    "Event": (".supervision.events", "Event"),
    "ExitKind": (".supervision.reasons", "ExitKind"),
    "ExitReason": (".supervision.reasons", "ExitReason"),
    "ChildSpec": (".supervision.specs", "ChildSpec"),
    "SupervisorFlags": (".supervision.specs", "SupervisorFlags"),
    "check_childspecs": (".supervision.specs", "check_childspecs"),
    "supervisor": (".supervision.specs", "supervisor"),
    "worker": (".supervision.specs", "worker"),
    "Supervisor": (".supervision.supervisor", "Supervisor"),
    "Worker": (".supervision.worker", "Worker"),
    "IGNORE": (".supervision.worker", "IGNORE"),
    "ActorRef": (".system.client", "ActorRef"),
    "SystemClient": (".system.client", "SystemClient"),
    "ActorSystem": (".system.handle", "ActorSystem"),
}


def __getattr__(name: str) -> Any:
    try:
        module_name, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'ouroactors' has no attribute {name!r}") from None
    module = importlib.import_module(module_name, __name__)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__version__ = "0.1.0"

__all__ = [
    "IGNORE", "ActorCrashed", "ActorCrashedBefore", "ActorRef", "ActorStopped", "ActorStopping", "ActorSystem",
    "ActorSystemError", "AlreadyPresent", "AlreadyStarted", "AskTimeout", "ChildInfo", "ChildNotFound",
    "ChildRestarting", "ChildRunning", "ChildSpec", "Event", "ExitKind", "ExitReason", "MaxChildren", "NoSuchActor",
    "OuroactorsError", "SimpleOneForOneOnly", "SpecError", "StaleGeneration", "StartFailed", "StartInterrupted",
    "Supervisor",
    "SupervisorError", "SupervisorFlags", "SystemClient", "UnhandledMessage", "UnsendableAnswer", "Worker",
    "check_childspecs", "faults", "supervisor", "worker",
]
