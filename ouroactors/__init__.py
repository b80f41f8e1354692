"""ouroactors: OTP-grade supervision trees for Python actors on thespian.

The public API is re-exported here; the modules behind it are implementation.
"""

from __future__ import annotations

from .core import faults as faults
from .core.errors import ActorCrashed as ActorCrashed
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
from .core.errors import SupervisorError as SupervisorError
from .core.errors import UnhandledMessage as UnhandledMessage
from .supervision.children import ChildInfo as ChildInfo
from .supervision.events import Event as Event
from .supervision.reasons import ExitKind as ExitKind
from .supervision.reasons import ExitReason as ExitReason
from .supervision.specs import ChildSpec as ChildSpec
from .supervision.specs import SupervisorFlags as SupervisorFlags
from .supervision.specs import check_childspecs as check_childspecs
from .supervision.specs import supervisor as supervisor
from .supervision.specs import worker as worker
from .supervision.supervisor import Supervisor as Supervisor
from .supervision.worker import Worker as Worker
from .system.handle import ActorRef as ActorRef
from .system.handle import ActorSystem as ActorSystem

__version__ = "0.1.0"

__all__ = [
    "ActorCrashed", "ActorRef", "ActorSystem", "ActorSystemError", "AlreadyPresent", "AlreadyStarted",
    "AskTimeout", "ChildInfo", "ChildNotFound", "ChildRestarting", "ChildRunning", "ChildSpec", "Event",
    "ExitKind", "ExitReason", "MaxChildren", "NoSuchActor", "OuroactorsError", "SimpleOneForOneOnly",
    "SpecError", "StaleGeneration", "StartFailed", "Supervisor", "SupervisorError", "SupervisorFlags",
    "UnhandledMessage", "Worker", "check_childspecs", "faults", "supervisor", "worker",
]
