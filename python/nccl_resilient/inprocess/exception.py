"""The reference restarter's exceptions (``inprocess.exception``), as
nccl_resilient's where it has them.

``RestartError`` is the base of the failures; ``RestartAbort`` derives from
``BaseException``, as the reference's does (restart-model.md §1.2, §1.1 step
5), so that ``except Exception`` in user code never swallows it: raised in
the wrapped function or a hook it ends the Wrapper on the rank that raised
it. ``RankShouldRestart`` is the asynchronous exception that unwinds the
wrapped function when a restart begins.
"""

from __future__ import annotations

from .. import errors as _errors

RestartError = _errors.RestartError
HealthCheckError = _errors.HealthCheckError
TimeoutError = _errors.TimeoutError  # noqa: A001 - the reference's name
RankShouldRestart = _errors.RankShouldRestart


class RestartAbort(BaseException):
    """Stop restarting: the Wrapper ends on the rank that raised it (the
    RetryController raises it on every rank alike, which ends the job)."""


class InternalError(RestartError):
    """The Wrapper itself failed (a fault of nccl_resilient, not of the job)."""


__all__ = ["HealthCheckError", "InternalError", "RankShouldRestart", "RestartAbort",
           "RestartError", "TimeoutError"]
