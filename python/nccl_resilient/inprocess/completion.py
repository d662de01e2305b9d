"""Completion hooks (the reference's ``Completion``): on every rank once the
wrapped function completed on every active rank."""

from __future__ import annotations

import abc

from .state import FrozenState


class Completion(abc.ABC):
    @abc.abstractmethod
    def __call__(self, state: FrozenState) -> FrozenState:
        raise NotImplementedError


__all__ = ["Completion"]
