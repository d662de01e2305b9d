"""Finalize hooks (the reference's ``inprocess.finalize``): after the abort,
before the health check, bring the process to where the function can run
again; a failure ends the Wrapper on this rank (re-raised)."""

from __future__ import annotations

import abc
import datetime
import sys
from typing import Any, Callable, Optional, Sequence

from .. import health as _health
from .state import FrozenState


class Finalize(abc.ABC):
    """A finalize hook: ``__call__(state)`` returns the state."""

    @abc.abstractmethod
    def __call__(self, state: FrozenState) -> FrozenState:
        raise NotImplementedError


def _current_cuda_device() -> Optional[int]:
    """The calling thread's CUDA device where torch uses CUDA, else None
    (torch is never imported here: a process without it has no device set,
    and the import would cost the restart seconds)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch.cuda.current_device()
    except Exception:
        pass
    return None


class ThreadedFinalize(Finalize):
    """Runs ``fn(*args, **kwargs)`` on a thread of its own (with the calling
    thread's CUDA device set there) and waits at most ``timeout``
    (TimeoutError; the thread cannot be cancelled and is left to finish):
    nccl_resilient.ThreadedFinalize."""

    def __init__(self, timeout: datetime.timedelta, fn: Callable[..., Any],
                 args: Sequence[Any] = (), kwargs: Optional[dict] = None) -> None:
        self.timeout = (timeout if isinstance(timeout, datetime.timedelta)
                        else datetime.timedelta(seconds=float(timeout)))
        self.fn = fn
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})

    def __call__(self, state: FrozenState) -> FrozenState:
        device = _current_cuda_device()

        def run(_state) -> None:
            if device is not None:
                sys.modules["torch"].cuda.set_device(device)
            self.fn(*self.args, **self.kwargs)

        _health.ThreadedFinalize(self.timeout, run)(state)
        return state


__all__ = ["Finalize", "ThreadedFinalize"]
