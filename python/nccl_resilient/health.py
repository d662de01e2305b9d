"""Health checks and hook helpers (the C++ health.hpp and hooks.hpp).

A health check is any callable taking a State that raises HealthCheckError
when this rank is unfit. The stock ones run the library's native checks:

    Wrapper(health_check=[nr.FaultCounter(3), nr.NicHealthCheck(), nr.CudaHealthCheck()])

(the last runs first). With ``automatic_health_checks`` (the default, knob
NCCL_RESILIENT_RESTART_AUTO_HEALTH_CHECKS) the library already runs CUDA, GPU
recovery and NIC checks at every restart, before yours.
"""

from __future__ import annotations

import ctypes
import datetime
import threading
from typing import Callable, Optional, Union

from . import _native
from .errors import ConfigError, FaultCounterExceeded, TimeoutError, error_for
from .state import State

Seconds = Union[None, int, float, datetime.timedelta]


def _c_state(state: State) -> _native.CState:
    """Each field of the library's state from the State's attribute of its name."""
    _native.library()  # lays CState out
    return _native.CState(**{name: int(getattr(state, name))
                             for name, _ in _native.CState._fields_})


class _NativeCheck:
    """A check the library runs: owns its handle (made by the library's
    resilient_restart_health_check_stock, _retry_controller, ...; NULL: the
    library's error as ConfigError) and runs it on a State."""

    def __init__(self, handle: Optional[int]) -> None:
        self._lib = _native.library()
        if not handle:
            raise ConfigError(_native.last_error())
        self._handle = handle

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle:
            self._lib.resilient_restart_health_check_destroy(handle)
            self._handle = None

    def _run(self, state: State) -> int:
        """The library's status of one run."""
        c = _c_state(state)
        return self._lib.resilient_restart_health_check_run(self._handle, ctypes.byref(c))


class _StockCheck(_NativeCheck):
    _name = ""
    _error = None  # the exception class for a failed check (None: the status's)

    def __init__(self, argument: int) -> None:
        super().__init__(_native.library().resilient_restart_health_check_stock(
            self._name.encode(), argument))

    def __call__(self, state: State) -> None:
        status = self._run(state)
        if status != _native.status("ok"):
            if self._error is not None and status == _native.status("health_check"):
                raise self._error(_native.last_error())
            raise error_for(status)


def _ms(value: Seconds) -> int:
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(float(value) * 1000)


class CudaHealthCheck(_StockCheck):
    """Synchronizes the rank's GPU twice (the first bounded by ``timeout``
    seconds; None: NCCL_RESILIENT_HEALTH_CUDA_TIMEOUT_MS). Fails without a
    CUDA runtime or device."""
    _name = "cuda"

    def __init__(self, timeout: Seconds = None) -> None:
        super().__init__(_ms(timeout))


class GpuRecoveryCheck(_StockCheck):
    """NVML's recovery action for the rank's GPU must be NONE; NVLink links
    down are reported, and fail with ``fail_on_nvlink_down``."""
    _name = "gpu_recovery"

    def __init__(self, fail_on_nvlink_down: bool = False) -> None:
        super().__init__(1 if fail_on_nvlink_down else 0)


class NicHealthCheck(_StockCheck):
    """Link state and error counters of the NICs NCCL uses (sysfs), compared
    with the previous run; ``error_threshold`` None: the knob's."""
    _name = "nic"

    def __init__(self, error_threshold: Optional[int] = None) -> None:
        super().__init__(-1 if error_threshold is None else int(error_threshold))


class FaultCounter(_StockCheck):
    """Raises FaultCounterExceeded once this rank faulted (its function raised,
    or it was named a culprit) in more than ``max_rank_faults`` iterations."""
    _name = "fault_counter"
    _error = FaultCounterExceeded

    def __init__(self, max_rank_faults: int) -> None:
        super().__init__(int(max_rank_faults))


class ThreadedFinalize:
    """A finalize hook that runs ``fn(state)`` on a thread of its own and
    waits at most ``timeout`` seconds for it (overrunning raises
    TimeoutError; the thread cannot be cancelled and is left to finish)."""

    def __init__(self, timeout: Seconds, fn: Callable[[State], None]) -> None:
        self.timeout = _ms(timeout) / 1000.0
        self.fn = fn

    def __call__(self, state: State) -> None:
        outcome: dict = {}

        def run() -> None:
            try:
                self.fn(state)
            except BaseException as e:  # handed to the caller
                outcome["error"] = e

        t = threading.Thread(target=run, name="nccl_resilient-finalize", daemon=True)
        t.start()
        t.join(self.timeout)
        if t.is_alive():
            raise TimeoutError(f"finalize did not end within {self.timeout:g} s")
        if "error" in outcome:
            raise outcome["error"]
