"""The effect ledger: write-ahead records of every effect, ambiguous (never guessed) when a crash
hides the outcome. The actor lives in :mod:`.actor`; effects are recorded with a :class:`LedgerWriter`
from the runner's own process (:mod:`.direct`) or by asking the actor (:mod:`.messages`)."""

from .direct import LedgerWriter as LedgerWriter
from .direct import NoLedger as NoLedger
from .domain import LedgerError as LedgerError
from .domain import StartRequest as StartRequest
from .domain import Status as Status
from .domain import fingerprint as fingerprint
from .messages import LedgerAnswer as LedgerAnswer
from .messages import RecordDenied as RecordDenied
from .messages import RecordSettled as RecordSettled
from .messages import RecordStarted as RecordStarted
from .store import Stamp as Stamp

__all__ = ["LedgerAnswer", "LedgerError", "LedgerWriter", "NoLedger", "RecordDenied", "RecordSettled",
           "RecordStarted", "Stamp", "StartRequest", "Status", "fingerprint"]
