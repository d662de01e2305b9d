"""nvidia-resiliency-ext's in-process restarter API over nccl_resilient.

A script written for the reference's ``inprocess`` package runs here by
changing its import::

    import nccl_resilient.inprocess as inprocess

The names, signatures, defaults and documented behaviour are the
reference's (restart-model.md §1.2, the usage guide and the rank
assignment pages of /work/shared/reference/seeds); the restart loop, its
barriers, monitor process, store and timeouts are nccl_resilient's, with
its sub-second fault signals, spares and etcd store.
docs/python.md "Coming from nvidia-resiliency-ext" lists every name and
what differs.
"""

from __future__ import annotations

from . import (abort, completion, compose, exception, finalize, health_check, initialize,
               nested_restarter, rank_assignment, state, store, terminate)
from .compose import Compose
from .state import FrozenState, Mode, State
from .wrap import CallWrapper, Wrapper


def __getattr__(name: str):
    if name == "rank_filter":  # the deprecated module, imported on first use
        import importlib
        return importlib.import_module(".rank_filter", __name__)
    raise AttributeError(f"module 'nccl_resilient.inprocess' has no attribute {name!r}")


__all__ = ["CallWrapper", "Compose", "FrozenState", "Mode", "State", "Wrapper", "abort",
           "completion", "compose", "exception", "finalize", "health_check", "initialize",
           "nested_restarter", "rank_assignment", "state", "store", "terminate"]
