"""Deprecated: the reference's older module of rank filters (the usage
guide's pseudocode keeps a ``rank_filter()`` step, marked deprecated). Its
classes are those of ``inprocess.rank_assignment``."""

from __future__ import annotations

import warnings

from .rank_assignment import (ActivateAllRanks, ActiveWorldSizeDivisibleBy, MaxActiveWorldSize,
                              RankFilter)

warnings.warn("nccl_resilient.inprocess.rank_filter is deprecated: use "
              "inprocess.rank_assignment", DeprecationWarning, stacklevel=2)

__all__ = ["ActivateAllRanks", "ActiveWorldSizeDivisibleBy", "MaxActiveWorldSize", "RankFilter"]
