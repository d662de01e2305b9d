"""The library's exceptions as Python classes (the C++ errors.hpp).

``RestartError`` is the base of every failure the library reports.
``RankShouldRestart`` and ``RestartAbort`` steer the loop: the first unwinds
the wrapped function when a restart begins (it derives from BaseException, as
the reference's does, so that an ``except Exception`` in user code does not
swallow it); the second ends the job on every rank.
"""

from __future__ import annotations

from . import _native


class RestartError(Exception):
    """Base of the library's failures."""


class RestartAbort(RestartError):
    """Stop restarting: the loop ends on every rank (raise it from the wrapped
    function or a hook to end the job)."""


class RankShouldRestart(BaseException):
    """A restart is under way: the wrapped function must unwind. Delivered
    asynchronously into the main thread; never catch it except to re-raise."""


class RankDiscarded(RestartError):
    """This rank was terminated by the rank assignment and leaves the job."""


class HealthCheckError(RestartError):
    """A health check found this rank unfit (raise it from a health check)."""


class RankNeedsNewProcess(HealthCheckError):
    """Only a new process can use this rank's GPU again (a sticky CUDA error):
    raise it from a health check. The rank leaves the job as an unhealthy
    one does; under resilient-run its process exits with code 75 and the
    agent starts a new one in its place (docs/restart.md, "Escalation")."""


class FaultCounterExceeded(HealthCheckError):
    """The per-rank fault counter passed its limit."""


class TimeoutError(RestartError):  # noqa: A001 - the library's name, as in C++
    """A hook, a phase, a barrier or a store call overran its timeout."""


class StoreUnavailable(TimeoutError):
    """The coordination store did not answer within an operation's bound."""


class ConfigError(RestartError, ValueError):
    """Options out of range or breaking the ordering rules (soft < hard < barrier)."""


class CommunicatorError(RestartError):
    """A communicator operation failed."""


# The exception of each status of the C API, by the status's name (its code
# is the library's: _native.status).
_BY_STATUS = {
    "aborted": RestartAbort,
    "discarded": RankDiscarded,
    "health_check": HealthCheckError,
    "needs_new_process": RankNeedsNewProcess,
    "timeout": TimeoutError,
    "config": ConfigError,
    "communicator": CommunicatorError,
    "store_unavailable": StoreUnavailable,
}


def error_for(status: int, what: str = "") -> BaseException:
    """The exception for a status of the C API, with the library's message."""
    if status == _native.status("should_restart"):
        return RankShouldRestart(what or _native.last_error())
    message = _native.last_error() or what
    names = {code: name for name, code in _native.constants("status").items()}
    return _BY_STATUS.get(names.get(status, ""), RestartError)(message)


def check(status: int, what: str = "") -> None:
    """Raises the exception for a non-OK status."""
    if status != _native.status("ok"):
        raise error_for(status, what)


def status_of(error: BaseException) -> int:
    """The C API status a Python exception stands for (hooks, the function)."""
    if isinstance(error, RankShouldRestart):
        return _native.status("should_restart")
    for name in ("aborted", "store_unavailable", "needs_new_process", "health_check", "timeout"):
        if isinstance(error, _BY_STATUS[name]):
            return _native.status(name)
    return _native.status("error")
