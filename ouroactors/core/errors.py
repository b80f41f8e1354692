"""Every error the framework raises on purpose.

Errors that cross a process boundary (answers from an actor to a caller outside) travel as
picklable *reply objects* defined next to the protocol; the system handle turns them back into
these exceptions, so user code only ever sees the classes here.
"""

from __future__ import annotations

from typing import Any

from .generation_text import format_generation


def _rebuild(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    """Unpickle an error without calling its ``__init__`` (whose signature may differ from args)."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class OuroactorsError(Exception):
    """Base class of every error raised by ouroactors.

    Errors travel between processes as answers, so every subclass must survive pickling whatever
    its constructor looks like: it is rebuilt from its message and attributes.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


class SpecError(OuroactorsError, ValueError):
    """A child spec, supervisor flags or tree file is invalid.

    ``problems`` lists ``(location, message)`` pairs; ``location`` is a key path such as
    ``children[2].restart`` so the user can find the bad field.
    """

    def __init__(self, problems: list[tuple[str, str]], source: str | None = None,
                 what: str = "supervision spec") -> None:
        self.problems = problems
        self.source = source
        self.what = what
        where = f"{source}: " if source else ""
        lines = [f"{where}{loc}: {msg}" if loc else f"{where}{msg}" for loc, msg in problems]
        super().__init__(f"invalid {what}:\n  " + "\n  ".join(lines))

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.problems, self.source, self.what))


class SupervisorError(OuroactorsError):
    """An admin request to a supervisor was refused; the subclass names OTP's outcome."""

    otp_name = "error"

    def __init__(self, child_id: str | None = None, detail: Any = None) -> None:
        self.child_id = child_id
        self.detail = detail
        text = self.otp_name if child_id is None else f"{self.otp_name}: {child_id}"
        if detail is not None:
            text += f" ({detail})"
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, ...]:
        # Answers cross processes pickled; rebuild from the fields, not from the message text.
        return (self.__class__, (self.child_id, self.detail))


class AlreadyStarted(SupervisorError):
    otp_name = "already_started"


class AlreadyPresent(SupervisorError):
    otp_name = "already_present"


class ChildRunning(SupervisorError):
    otp_name = "running"


class ChildRestarting(SupervisorError):
    otp_name = "restarting"


class ChildNotFound(SupervisorError):
    otp_name = "not_found"


class SimpleOneForOneOnly(SupervisorError):
    """The request is not valid for a simple_one_for_one supervisor (OTP's ``simple_one_for_one``)."""

    otp_name = "simple_one_for_one"


class MaxChildren(SupervisorError):
    otp_name = "max_children"


class StartFailed(SupervisorError):
    """A child (or a whole tree) failed to start; ``detail`` is the exit reason."""

    otp_name = "failed_to_start_child"


class ActorCrashed(OuroactorsError):
    """The actor crashed while handling the request; it does not serve further messages."""

    def __init__(self, path: str, reason: Any) -> None:
        self.path = path
        self.reason = reason
        super().__init__(self._describe(path, reason))

    @staticmethod
    def _describe(path: str, reason: Any) -> str:
        return f"{path} crashed: {reason}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.path, self.reason))


class ActorCrashedBefore(ActorCrashed):
    """The actor had crashed (on an earlier request) before this one reached it, and did not handle this one.

    What a crashed worker answers while it waits to be ended. A subclass of :class:`ActorCrashed`, which code that
    catches a crash catches as before; but the request was not handled, so a handle asking by path does not raise it:
    it waits for the supervisor's next incarnation and asks that (see :meth:`ouroactors.system.client.SystemClient.
    ask`). Raised only when no next incarnation answers within the ask's resends, or through an
    :class:`~ouroactors.ActorRef` (which names the incarnation that crashed)."""

    @staticmethod
    def _describe(path: str, reason: Any) -> str:
        return f"{path} crashed: {reason} (before this request, which it did not handle)"


class UnsendableAnswer(OuroactorsError):
    """The actor handled the request, but its answer cannot travel between processes: it does not pickle (a
    lambda, a generator, a lock, an open file), its pickle is over the frame cap, or it does not unpickle (an
    exception whose ``__init__`` does not take the ``args`` it gives ``Exception``). What the request did stays
    done; only the answer is lost, so the asker gets this at once instead of waiting out its timeout."""

    def __init__(self, path: str, answer_type: str, detail: str) -> None:
        self.path = path
        self.answer_type = answer_type
        self.detail = detail
        super().__init__(f"{path} handled the request, but its answer ({answer_type}) cannot be sent between "
                         f"processes: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.path, self.answer_type, self.detail))


class UnhandledMessage(OuroactorsError):
    """The actor has no handler for the message type; nothing was done."""

    def __init__(self, path: str, message_type: str, hint: str = "") -> None:
        self.path = path
        self.message_type = message_type
        self.hint = hint
        super().__init__(f"{path} has no handler for {message_type}" + (f"; {hint}" if hint else ""))

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.path, self.message_type, self.hint))


def _generation(value: int | None, missing: str) -> str:
    """A generation as every table prints it (``epoch.micros``, zero-padded), so an error reads the same."""
    return missing if value is None else format_generation(value)


class StaleGeneration(OuroactorsError):
    """A request was stamped with an authority generation that is gone; nothing was done."""

    def __init__(self, authority: str, expected: int | None, got: int | None) -> None:
        self.authority = authority
        self.expected = expected
        self.got = got
        super().__init__(f"stale generation for {authority}: request stamped {_generation(got, 'nothing')}, "
                         f"current is {_generation(expected, 'not assigned yet')}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.authority, self.expected, self.got))


class NoSuchActor(OuroactorsError):
    """No live actor at that tree path."""


class ActorStopped(NoSuchActor):
    """The actor asked stopped before it answered (its supervisor terminated or restarted it): no answer will come.
    The request may or may not have been handled — a command is asked again under its idempotency key."""


class ActorStopping(NoSuchActor):
    """The actor is stopping (or not started yet) and did not handle the request: a handle asking by path asks
    its supervisor's next incarnation of it instead (see :meth:`ouroactors.system.client.SystemClient.ask`)."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"{path} is not running (it is stopping, or not started yet); it did not handle this request")

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.path,))


class AskTimeout(OuroactorsError):
    """No answer arrived within the timeout."""


class StartInterrupted(OuroactorsError):
    """A wait for a tree's start was given up on request (a stop signal) before the tree was up."""


class ActorSystemError(OuroactorsError):
    """The actor system could not be started, reached, or shut down cleanly."""


class CommitRejected(OuroactorsError):
    """Storage definitely did not write it (fenced, map full, I/O error before the meta page)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"commit rejected: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.reason,))


class CommitOutcomeUnknown(OuroactorsError):
    """Storage may or may not have written it: reconcile (read back) before anything depends on it."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"commit outcome unknown: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.reason,))


class CorruptRecord(OuroactorsError):
    """A durable record could not be decoded; it was quarantined and is reported, never emptied."""

    def __init__(self, where: str, detail: str) -> None:
        self.where = where
        self.detail = detail
        super().__init__(f"corrupt record {where}: {detail} (quarantined)")

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.where, self.detail))


class BadRequest(OuroactorsError, ValueError):
    """A request refused at an authority's door: a field has the wrong type, size or range.

    Nothing was done. ``message`` names the request type, ``field`` the key path inside it
    (``request.paths[3]``), ``problem`` what is wrong, ``value`` a short repr of what was sent.
    """

    def __init__(self, message: str, field: str, problem: str, value: str = "") -> None:
        self.message = message
        self.field = field
        self.problem = problem
        self.value = value
        where = f"{message}.{field}" if field else message
        super().__init__(f"bad request {where}: {problem}" + (f" (got {value})" if value else ""))

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.message, self.field, self.problem, self.value))


class StampRequired(StaleGeneration):
    """An authority request arrived without the generation stamp every request must carry.

    A subclass of :class:`StaleGeneration` on purpose: a consumer that re-binds on a stale answer
    (looks the generation up and stamps again) handles a missing stamp the same way.
    """

    def __init__(self, authority: str, expected: int | None, got: int | None = None) -> None:
        super().__init__(authority, expected, got)
        Exception.__init__(self, f"{authority} serves only stamped requests (its generation is "
                                 f"{_generation(expected, 'not assigned yet')}); "
                                 "stamp the request with the generation you looked up")
