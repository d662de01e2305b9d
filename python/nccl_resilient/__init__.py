"""nccl_resilient: the nccl-resilient restart library for Python.

In-process restart of a distributed job after a fault anywhere in it (a dead
or frozen rank, an exception, a failed health check), with spare ranks, rank
reassignment and the library's sub-second fault signals. docs/python.md shows
how to wrap a torch training script.
"""

from __future__ import annotations

from . import _native
from .assignment import (ActivateAllRanks, ActiveWorldSizeDivisibleBy, FillGaps, Layer,
                         LayerFlag, MaxActiveWorldSize, Policy, ShiftRanks, Slot, Tree)
from .errors import (CommunicatorError, ConfigError, FaultCounterExceeded, HealthCheckError,
                     RankDiscarded, RankNeedsNewProcess, RankShouldRestart, RestartAbort,
                     RestartError, StoreUnavailable, TimeoutError)
from .health import (CudaHealthCheck, FaultCounter, GpuRecoveryCheck, NicHealthCheck,
                     ThreadedFinalize)
from .state import Mode, State
from .store import Store
from .wrapper import CallContext, Wrapper, current_context, option_defaults, options_table

__all__ = [
    "ActivateAllRanks", "ActiveWorldSizeDivisibleBy", "CallContext", "CommunicatorError",
    "ConfigError", "CudaHealthCheck", "FaultCounter", "FaultCounterExceeded", "FillGaps",
    "GpuRecoveryCheck", "HealthCheckError", "Layer", "LayerFlag", "MaxActiveWorldSize",
    "NicHealthCheck", "Tree",
    "ThreadedFinalize",
    "Mode", "Policy", "RankDiscarded", "RankNeedsNewProcess", "RankShouldRestart", "RestartAbort",
    "RestartError",
    "ShiftRanks", "Slot", "State", "Store", "StoreUnavailable", "TimeoutError", "Wrapper",
    "current_context",
    "library_version", "option_defaults", "options",
]


def library_version() -> str:
    """The version of libresilient-restart.so in use."""
    return _native.library().resilient_restart_version().decode()


def options() -> list:
    """The names of the Wrapper's options (durations in seconds)."""
    return sorted(options_table())
