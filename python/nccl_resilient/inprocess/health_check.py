"""Health checks (the reference's ``inprocess.health_check``): run at the
start of every iteration and at every restart; one that raises ends the
Wrapper on its rank (the exception is re-raised there) while the others go
on without it. The library also runs its own checks at every restart
(automatic_health_checks: CUDA and the GPU's recovery action where a GPU
is usable, the NICs), as the reference chains its GPU, NVLink and NIC
checks."""

from __future__ import annotations

import abc
import datetime
import sys
from typing import Optional

from .. import health as _health
from ..errors import FaultCounterExceeded, HealthCheckError
from ._log import logger
from .state import FrozenState


class HealthCheck(abc.ABC):
    """A health check: ``__call__(state)`` returns the state or raises."""

    @abc.abstractmethod
    def __call__(self, state: FrozenState) -> FrozenState:
        raise NotImplementedError


def _torch_uses_cuda() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_available()
                    and torch.cuda.is_initialized())
    except Exception:
        return False


class CudaHealthCheck(HealthCheck):
    """Waits for the rank's CUDA device to drain its queue (at most
    ``timeout``, then HealthCheckError/TimeoutError), then synchronizes once
    more to surface a corrupted context: the library's CUDA check
    (nccl_resilient.CudaHealthCheck). A process whose torch never
    initialized CUDA has nothing queued: it passes."""

    def __init__(self, timeout: datetime.timedelta = datetime.timedelta(seconds=30)) -> None:
        self.timeout = (timeout if isinstance(timeout, datetime.timedelta)
                        else datetime.timedelta(seconds=float(timeout)))
        self._check: Optional[_health.CudaHealthCheck] = None

    def __call__(self, state: FrozenState) -> FrozenState:
        if not _torch_uses_cuda():
            return state
        if self._check is None:
            self._check = _health.CudaHealthCheck(self.timeout)
        self._check(state)
        return state


class FaultCounter(HealthCheck):
    """FaultCounterExceeded once this rank faulted (its function raised, or
    the library named it the culprit) in more than ``max_rank_faults``
    iterations (None: counts, never fails): nccl_resilient.FaultCounter."""

    def __init__(self, max_rank_faults: Optional[int] = None) -> None:
        self.max_rank_faults = max_rank_faults
        self._check = _health.FaultCounter(1 << 30 if max_rank_faults is None
                                           else int(max_rank_faults))

    def __call__(self, state: FrozenState) -> FrozenState:
        self._check(state)
        return state


class ChainedGPUHealthCheck(HealthCheck):
    """NVML's recovery action for the rank's GPU must be NONE (the library's
    GPU recovery check; it fails where NVML or the GPU cannot be read)."""

    def __init__(self) -> None:
        self._check = _health.GpuRecoveryCheck(fail_on_nvlink_down=False)

    def __call__(self, state: FrozenState) -> FrozenState:
        self._check(state)
        return state


class ChainedNVLHealthCheck(HealthCheck):
    """The state of the GPU's NVLink links, reported and never failing (as
    the reference, whose NVLink failures are ignored): the library's GPU
    recovery check, its outcome logged."""

    def __init__(self) -> None:
        self._check = _health.GpuRecoveryCheck(fail_on_nvlink_down=True)
        self.last: Optional[str] = None

    def __call__(self, state: FrozenState) -> FrozenState:
        try:
            self._check(state)
            self.last = None
        except HealthCheckError as e:
            self.last = str(e)
            logger().warning("NVLink health (reported, not failing): %s", e)
        return state


class ChainedNicHealthCheck(HealthCheck):
    """The NICs' link state and error counters (``link_downed`` and others)
    must not have worsened since the previous check: the library's NIC
    check."""

    def __init__(self) -> None:
        self._check = _health.NicHealthCheck()

    def __call__(self, state: FrozenState) -> FrozenState:
        self._check(state)
        return state


__all__ = ["ChainedGPUHealthCheck", "ChainedNVLHealthCheck", "ChainedNicHealthCheck",
           "CudaHealthCheck", "FaultCounter", "FaultCounterExceeded", "HealthCheck"]
