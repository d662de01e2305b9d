"""Abort hooks (the reference's ``inprocess.abort``): run from the
library's monitor thread when a restart begins, to release the wrapped
function from whatever blocks it. In a Compose the last runs first: put
AbortTorchDistributed last (usage guide, Restrictions)."""

from __future__ import annotations

import abc
import datetime
import os
import sys
from typing import Optional

from .. import distributed as _rdist
from ..errors import ConfigError
from .state import FrozenState


class Abort(abc.ABC):
    """An abort hook: ``__call__(state)`` returns the state."""

    @abc.abstractmethod
    def __call__(self, state: FrozenState) -> FrozenState:
        raise NotImplementedError


def _trace_buffer_size() -> int:
    for name in ("TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE"):
        try:
            value = int(os.environ.get(name, "0"))
        except ValueError:
            continue
        if value > 0:
            return value
    return 0


def _trace_dumper():
    """torch's Flight Recorder dump (torch 2.x), or None."""
    try:
        import torch
        return getattr(torch._C._distributed_c10d, "_dump_nccl_trace", None)
    except (ImportError, AttributeError):
        return None


class AbortTorchDistributed(Abort):
    """Aborts every torch.distributed process group with what the running
    torch offers (nccl_resilient.distributed.AbortTorchDistributed: one
    thread per group) and forgets them, so that the next iteration's
    ``init_process_group`` can run (nccl_resilient.distributed.
    retire_process_groups: gloo groups before torch 2.6, which have no
    abort, stay referenced until their own timeout ends what waits in them,
    as the usage guide's Known issues say). With a Flight Recorder buffer
    (TORCH_NCCL_TRACE_BUFFER_SIZE or TORCH_FR_BUFFER_SIZE above 0) its dump
    is written first to ``torch_fr_trace_path`` (else NVRX_FR_TRACE_PATH):
    ``{rank}`` in it is the initial rank, else ``_<rank>`` is appended."""

    def __init__(self, torch_fr_trace_path: Optional[str] = None) -> None:
        if torch_fr_trace_path is not None and _trace_dumper() is None:
            raise ConfigError("AbortTorchDistributed(torch_fr_trace_path=...): this torch has no "
                              "Flight Recorder (torch._C._distributed_c10d._dump_nccl_trace)")
        self.torch_fr_trace_path = torch_fr_trace_path
        self._abort = _rdist.AbortTorchDistributed()

    def _dump_trace(self, state: FrozenState) -> Optional[str]:
        path = self.torch_fr_trace_path or os.environ.get("NVRX_FR_TRACE_PATH")
        dump = _trace_dumper()
        if not path or dump is None or _trace_buffer_size() <= 0:
            return None
        rank = state.initial_rank
        target = path.replace("{rank}", str(rank)) if "{rank}" in path else f"{path}_{rank}"
        with open(target, "wb") as f:
            f.write(dump())
        return target

    def __call__(self, state: FrozenState) -> FrozenState:
        if "torch.distributed" not in sys.modules:
            return state  # never imported: no process group to abort (nor torch to load now)
        dist = _rdist._dist()
        if not dist.is_available() or not dist.is_initialized():
            return state
        self.trace_file = self._dump_trace(state)
        self._abort(state)
        _rdist.retire_process_groups()
        return state


class AbortTransformerEngine(Abort):
    """Releases Transformer Engine's process-wide state (its userbuffers and
    its FP8 global state) where the process has imported Transformer
    Engine; without it there is none to release."""

    def __call__(self, state: FrozenState) -> FrozenState:
        if "transformer_engine" not in sys.modules:
            return state
        import transformer_engine.pytorch as te  # noqa: PLC0415 - only where imported
        base = getattr(getattr(te, "module", None), "base", None)
        destroy_ub = getattr(base, "destroy_ub", None)
        if destroy_ub is not None:
            destroy_ub()
        manager = getattr(getattr(te, "fp8", None), "FP8GlobalStateManager", None)
        if manager is not None:
            manager.reset()
        if destroy_ub is None and manager is None:
            raise ConfigError("AbortTransformerEngine: this Transformer Engine has neither "
                              "pytorch.module.base.destroy_ub nor pytorch.fp8."
                              "FP8GlobalStateManager")
        return state


class AbortPersistentCheckpointProcesses(Abort):
    """Refused: it ends the worker processes of nvidia-resiliency-ext's
    persistent asynchronous checkpointing, which nccl_resilient does not
    have."""

    def __init__(self, *args, **kwargs) -> None:
        raise ConfigError(
            "AbortPersistentCheckpointProcesses: nccl_resilient has no asynchronous "
            "checkpointing whose worker processes it could end; a checkpoint writer of your own "
            "is ended by an Abort of your own, and writes inside CallWrapper.atomic() are never "
            "interrupted (docs/python.md, Coming from nvidia-resiliency-ext)")

    def __call__(self, state: FrozenState) -> FrozenState:  # never made: see __init__
        raise ConfigError("AbortPersistentCheckpointProcesses is refused")


__all__ = ["Abort", "AbortPersistentCheckpointProcesses", "AbortTorchDistributed",
           "AbortTransformerEngine"]
