"""Terminate hooks (the reference's ``Terminate``): on a rank whose Wrapper
ends without completing (a BaseException, a failed health check or
finalize, a rank discarded, the job aborted)."""

from __future__ import annotations

import abc

from .state import FrozenState


class Terminate(abc.ABC):
    @abc.abstractmethod
    def __call__(self, state: FrozenState) -> FrozenState:
        raise NotImplementedError


__all__ = ["Terminate"]
