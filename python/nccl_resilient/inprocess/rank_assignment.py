"""Rank assignment (the reference's ``inprocess.rank_assignment``,
seeds/004): which ranks take part in the next iteration, with which rank,
active or as spares.

Inside the Wrapper the stock policies run natively over the whole World on
every rank (nccl_resilient's rank assignment: docs/restart.md "Rank
assignment"): ShiftRanks, FillGaps, ActivateAllRanks, MaxActiveWorldSize,
ActiveWorldSizeDivisibleBy and Tree (the library's tree, keys gathered from
the ranks once); FilterCountGroupedByKey and RankAssignment subclasses of
your own run in Python on each rank over its own context and tell the
others through the store (an all-gather per assignment, bounded by a
timeout). Called by hand on one rank's RankAssignmentCtx, each stock class
computes that rank's part as the reference documents it.

``RankAssignmentCtx.terminated_ranks`` holds ranks as numbered in
``ctx.state.rank`` (the World before the policy): the ranks terminated and
not yet removed by a renumbering policy.
"""

from __future__ import annotations

import abc
import dataclasses
import datetime
import itertools
import logging
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Set, Union

from .. import assignment as _native_assignment
from ..assignment import LayerFlag, Policy, Slot
from ..errors import ConfigError, RankDiscarded, RestartError
from ._exchange import Binding, gather
from .compose import Compose
from .state import Mode, State
from .store import StoreMixin

log = logging.getLogger("nccl_resilient.inprocess")
KeyOrFn = Union[str, Callable[[State], str]]


@dataclasses.dataclass
class RankAssignmentCtx:
    """What a RankAssignment reads and returns: this rank's ``state``, the
    job's ``store`` (under a prefix of the iteration's) and the
    ``terminated_ranks`` (ranks as numbered in ``state.rank``)."""

    state: State
    store: Optional[StoreMixin]
    terminated_ranks: Set[int]


class RankAssignment(abc.ABC):
    """A policy for ``Wrapper(rank_assignment=...)``: ``__call__(ctx)``
    returns the modified RankAssignmentCtx; compose several with Compose
    (the last runs first). A subclass of your own runs on every rank over
    its own context; the Wrapper gathers every rank's result through the
    store and builds the next World from them (raise RankDiscarded, or
    put a rank in ``terminated_ranks``, to drop it)."""

    @abc.abstractmethod
    def __call__(self, ctx: RankAssignmentCtx) -> RankAssignmentCtx:
        raise NotImplementedError

    def _policies(self, binding: Binding, index: int) -> List[Policy]:
        """The library policies that do this inside the Wrapper."""
        return [_UserPolicy(self, binding, index)]


class RankFilter(RankAssignment):
    """A RankAssignment that only chooses which ranks are active (usually
    after the policies that renumber)."""


# ---- one rank's part, as the reference documents each policy ---------------
#
# Renumbering (ShiftRanks, FillGaps) closes the holes; the active ranks are
# taken to be the lowest ones, so the active world size is at most the new
# world size. The filters set every rank's mode by its index among the
# healthy ranks: active below the active world size they compute, inactive
# past it (seeds/002, Rank filtering; seeds/004 MaxActiveWorldSize), so a
# reserve whose index falls below it after a fault is activated.

def _dead(ctx: RankAssignmentCtx) -> int:
    return sum(1 for t in ctx.terminated_ranks if 0 <= t < ctx.state.world_size)


def _index(ctx: RankAssignmentCtx) -> int:
    """This rank's position among the healthy ranks."""
    return ctx.state.rank - sum(1 for t in ctx.terminated_ranks if t < ctx.state.rank)


def _check_alive(ctx: RankAssignmentCtx, name: str) -> None:
    if ctx.state.rank in ctx.terminated_ranks:
        raise RankDiscarded(f"{name}: rank {ctx.state.rank} was terminated")


def _renumbered(ctx: RankAssignmentCtx, rank: int) -> RankAssignmentCtx:
    s = ctx.state
    size = s.world_size - _dead(ctx)
    active = s.world_size if s.active_world_size is None else s.active_world_size
    s.rank, s.world_size = rank, size
    s.active_world_size = min(active, size)
    s.active_rank = rank if s.mode == Mode.ACTIVE else None
    ctx.terminated_ranks = set()
    return ctx


class ShiftRanks(RankAssignment):
    """Every healthy rank past the first terminated one slides left: the
    order is kept, the holes are closed (seeds/004 ShiftRanks); a rank in
    ``terminated_ranks`` raises RankDiscarded."""

    def __call__(self, ctx: RankAssignmentCtx) -> RankAssignmentCtx:
        _check_alive(ctx, "ShiftRanks")
        return _renumbered(ctx, _index(ctx))

    def _policies(self, binding: Binding, index: int) -> List[Policy]:
        return [_native_assignment.ShiftRanks()]


class FillGaps(RankAssignment):
    """The first ``world_size - len(terminated)`` ranks keep their rank; the
    healthy ranks past them fill the holes, in order (seeds/004 FillGaps)."""

    def __call__(self, ctx: RankAssignmentCtx) -> RankAssignmentCtx:
        _check_alive(ctx, "FillGaps")
        s = ctx.state
        dead = sorted(t for t in ctx.terminated_ranks if 0 <= t < s.world_size)
        size = s.world_size - len(dead)
        rank = s.rank
        if rank >= size:
            movers = [r for r in range(size, s.world_size) if r not in ctx.terminated_ranks]
            rank = [t for t in dead if t < size][movers.index(rank)]
        return _renumbered(ctx, rank)

    def _policies(self, binding: Binding, index: int) -> List[Policy]:
        return [_native_assignment.FillGaps()]


def _activate_below(ctx: RankAssignmentCtx, keep: int) -> RankAssignmentCtx:
    s = ctx.state
    index = _index(ctx)
    s.active_world_size = keep
    if index < keep:
        s.mode, s.active_rank = Mode.ACTIVE, index
    else:
        s.mode, s.active_rank = Mode.INACTIVE, None
    return ctx


def _healthy(ctx: RankAssignmentCtx) -> int:
    return ctx.state.world_size - _dead(ctx)


def _active_in(ctx: RankAssignmentCtx) -> int:
    """The active world size a filter starts from (at most the healthy ranks)."""
    active = ctx.state.active_world_size
    return _healthy(ctx) if active is None else min(active, _healthy(ctx))


class ActivateAllRanks(RankFilter):
    """Every healthy rank is active (seeds/004 ActivateAllRanks); not to be
    combined with another policy that activates ranks."""

    def __call__(self, ctx: RankAssignmentCtx) -> RankAssignmentCtx:
        return _activate_below(ctx, _healthy(ctx))

    def _policies(self, binding: Binding, index: int) -> List[Policy]:
        return [_native_assignment.ActivateAllRanks()]


class MaxActiveWorldSize(RankFilter):
    """The active world size is at most ``max_active_world_size`` (None: no
    limit): the healthy ranks of lower index are active, the others wait
    as reserves (seeds/004 MaxActiveWorldSize)."""

    def __init__(self, max_active_world_size: Optional[int] = None) -> None:
        if max_active_world_size is not None and int(max_active_world_size) < 1:
            raise ConfigError(f"MaxActiveWorldSize: {max_active_world_size} is not a world size")
        self.max_active_world_size = max_active_world_size

    def __call__(self, ctx: RankAssignmentCtx) -> RankAssignmentCtx:
        limit = self.max_active_world_size
        active = _active_in(ctx)
        return _activate_below(ctx, active if limit is None else min(active, int(limit)))

    def _policies(self, binding: Binding, index: int) -> List[Policy]:
        if self.max_active_world_size is None:
            return []
        return [_native_assignment.MaxActiveWorldSize(int(self.max_active_world_size))]


class ActiveWorldSizeDivisibleBy(RankFilter):
    """The active world size is cut down to a multiple of ``divisor``; the
    healthy ranks past it wait as reserves (seeds/004
    ActiveWorldSizeDivisibleBy)."""

    def __init__(self, divisor: int = 1) -> None:
        if int(divisor) < 1:
            raise ConfigError(f"ActiveWorldSizeDivisibleBy: divisor {divisor} is not positive")
        self.divisor = int(divisor)

    def __call__(self, ctx: RankAssignmentCtx) -> RankAssignmentCtx:
        active = _active_in(ctx)
        return _activate_below(ctx, active - active % self.divisor)

    def _policies(self, binding: Binding, index: int) -> List[Policy]:
        return [_native_assignment.ActiveWorldSizeDivisibleBy(self.divisor)]


# ---- policies that need what each rank knows of itself ----------------------

def _key_of(key_or_fn: KeyOrFn, state: State) -> str:
    return key_or_fn if isinstance(key_or_fn, str) else str(key_or_fn(state))


def _slot_state(world: Sequence[Slot], me: int, binding: Binding) -> State:
    """This rank's State in the World being assigned (rank space: the World's)."""
    last = binding.last_state()
    slot = world[me]
    live = [s for s in world if s.mode != Mode.TERMINATED]
    active = sorted((s for s in live if s.mode == Mode.ACTIVE), key=lambda s: s.rank)
    holes = _holes(world, last)
    return State(rank=slot.rank, world_size=len(live) + len(holes),
                 active_rank=next((i for i, s in enumerate(active) if s.initial_rank == me), None),
                 active_world_size=len(active), initial_rank=me,
                 initial_world_size=len(world), iteration=last.iteration, mode=slot.mode,
                 fn_exception=getattr(last, "fn_exception", None))


def _holes(world: Sequence[Slot], last) -> List[int]:
    """The ranks of the terminated slots not yet closed by a renumbering
    policy: the numbers below the previous world size that no live slot
    holds (none once the live ranks are 0..n-1)."""
    ranks = {s.rank for s in world if s.mode != Mode.TERMINATED}
    if ranks == set(range(len(ranks))):
        return []
    size = max(int(last.world_size), max(ranks) + 1)
    return sorted(set(range(size)) - ranks)


class _Counter:
    """A round number per assignment: every live rank runs every policy
    once per assignment, in the same order."""

    def __init__(self) -> None:
        self._count = itertools.count()

    def next(self) -> int:
        return next(self._count)


class FilterCountGroupedByKey(RankAssignment):
    """Groups the healthy ranks by a key (``key_or_fn``: a string, or a
    function of the rank's State) and counts each group; a rank whose
    group's count fails ``condition(count)`` is marked terminated, for a
    following renumbering policy to remove (seeds/004
    FilterCountGroupedByKey). ``timeout`` bounds the gathering of the keys
    (BarrierTimeout)."""

    def __init__(self, key_or_fn: KeyOrFn, condition: Callable[[int], bool],
                 timeout: datetime.timedelta = datetime.timedelta(seconds=60)) -> None:
        if not (isinstance(key_or_fn, str) or callable(key_or_fn)):
            raise ConfigError(f"FilterCountGroupedByKey: key_or_fn {key_or_fn!r} is neither a "
                              "string nor callable")
        if not callable(condition):
            raise ConfigError(f"FilterCountGroupedByKey: condition {condition!r} is not callable")
        self.key_or_fn = key_or_fn
        self.condition = condition
        self.timeout = (timeout if isinstance(timeout, datetime.timedelta)
                        else datetime.timedelta(seconds=float(timeout)))
        self._rounds = _Counter()

    def _failing(self, keys: Dict[int, str]) -> Set[int]:
        counts: Dict[str, int] = {}
        for k in keys.values():
            counts[k] = counts.get(k, 0) + 1
        return {r for r, k in keys.items() if not self.condition(counts[k])}

    def __call__(self, ctx: RankAssignmentCtx) -> RankAssignmentCtx:
        if ctx.store is None:
            raise ConfigError("FilterCountGroupedByKey needs the context's store to count groups")
        s = ctx.state
        members = [r for r in range(s.world_size) if r not in ctx.terminated_ranks]
        if s.rank in ctx.terminated_ranks:
            return ctx
        binding = Binding(ctx.store, s.rank, s.world_size, self.timeout.total_seconds(),
                          lambda: s)
        keys = gather(binding, f"filter_count/{s.iteration}/{self._rounds.next()}",
                      _key_of(self.key_or_fn, s), members)
        ctx.terminated_ranks = set(ctx.terminated_ranks) | self._failing(keys)
        return ctx

    def _policies(self, binding: Binding, index: int) -> List[Policy]:
        return [_FilterPolicy(self, binding, index)]


class _FilterPolicy(Policy):
    """FilterCountGroupedByKey over the World: each live rank gathers every
    live rank's key and terminates the slots of failing groups alike."""

    def __init__(self, filter: FilterCountGroupedByKey, binding: Binding, index: int) -> None:
        self.filter = filter
        self.binding = binding
        self.index = index
        self.rounds = _Counter()

    def describe(self) -> str:
        return "FilterCountGroupedByKey"

    def __call__(self, world, terminated, first_iteration) -> None:
        me = self.binding.initial_rank
        live = [s.initial_rank for s in world if s.mode != Mode.TERMINATED]
        if me not in live:
            return
        key = _key_of(self.filter.key_or_fn, _slot_state(world, me, self.binding))
        keys = gather(self.binding, f"filter_count/{self.index}/{self.rounds.next()}", key, live,
                      self.filter.timeout.total_seconds())
        for r in self.filter._failing(keys):
            world[r].mode = Mode.TERMINATED
            world[r].rank = -1


class _UserPolicy(Policy):
    """A RankAssignment of the user's over the World: each live rank runs it
    on its own context; the results, gathered, make the World."""

    def __init__(self, user: RankAssignment, binding: Binding, index: int) -> None:
        self.user = user
        self.binding = binding
        self.index = index
        self.rounds = _Counter()

    def describe(self) -> str:
        return type(self.user).__name__

    def __call__(self, world, terminated, first_iteration) -> None:
        me = self.binding.initial_rank
        live = [s.initial_rank for s in world if s.mode != Mode.TERMINATED]
        if me not in live:
            return
        before = {s.initial_rank: s.rank for s in world if s.mode != Mode.TERMINATED}
        state = _slot_state(world, me, self.binding)
        ctx = RankAssignmentCtx(state, self.binding.store.prefixed(f"user/{self.index}"),
                                set(_holes(world, self.binding.last_state())))
        try:
            out = self.user(ctx) or ctx
            mine = {"rank": int(out.state.rank), "mode": int(Mode(out.state.mode)),
                    "terminated": sorted(int(t) for t in out.terminated_ranks),
                    "discarded": False}
        except RankDiscarded:
            mine = {"rank": -1, "mode": int(Mode.TERMINATED), "terminated": [], "discarded": True}
        results = gather(self.binding, f"user/{self.index}/{self.rounds.next()}", mine, live)
        marked = set()
        for r in results.values():
            marked.update(r["terminated"])
        for i, r in results.items():
            if r["discarded"] or before[i] in marked or r["mode"] == int(Mode.TERMINATED):
                world[i].mode, world[i].rank = Mode.TERMINATED, -1
            else:
                world[i].mode, world[i].rank = Mode(r["mode"]), r["rank"]


# ---- Tree -------------------------------------------------------------------

@dataclasses.dataclass
class Layer:
    """One layer of a Tree (seeds/004 Layer): at least ``min_ranks``
    healthy ranks per branch (else the branch is terminated), at most
    ``max_ranks`` active ones (None: no limit), branches grouped by
    ``key_or_fn`` (a string, or a function of the rank's State), ``flag``
    LayerFlag.RESERVE and/or BACKFILL."""

    min_ranks: int = 1
    max_ranks: Optional[int] = None
    key_or_fn: KeyOrFn = ""
    flag: Optional[LayerFlag] = None


def _reserve_flags(layers: Sequence[Layer]) -> List[int]:
    """The library's flags for the reference's spare search: from the
    nearest RESERVE layer up, until a layer without RESERVE (the library
    searches every enclosing RESERVE layer: those above the stop lose it)."""
    flags = [int(layer.flag or 0) for layer in layers]
    reserve = int(LayerFlag.RESERVE)
    deepest = max((k for k, f in enumerate(flags) if f & reserve), default=None)
    if deepest is not None:
        k = deepest
        while k >= 0 and flags[k] & reserve:
            k -= 1
        for above in range(k, -1, -1):
            flags[above] &= ~reserve
    return flags


class Tree(RankAssignment):
    """Topology-aware assignment (seeds/004 Tree), run by the library's
    tree: a root over ``layers`` (the first layer's branches under it, each
    further layer splitting its parent's), activation depth-first under each
    layer's ``max_ranks``; after faults, branches below ``min_ranks``
    terminated, failed active ranks replaced by spares searched upward
    through RESERVE layers, backfilled inside BACKFILL layers, the rest
    shifted, then ``world_size_filter(active) -> active to keep``. Keys are
    evaluated once, on each rank with its first State, and gathered. Not
    composable with other policies."""

    def __init__(self, layers: Sequence[Layer],
                 world_size_filter: Optional[Callable[[int], int]] = None) -> None:
        self.layers = list(layers)
        if not self.layers:
            raise ConfigError("Tree needs at least one Layer")
        for i, layer in enumerate(self.layers):
            if not isinstance(layer, Layer):
                raise ConfigError(f"Tree: layer {i} is {layer!r}, not an inprocess Layer")
            if not (isinstance(layer.key_or_fn, str) or callable(layer.key_or_fn)):
                raise ConfigError(f"Tree: layer {i}'s key_or_fn {layer.key_or_fn!r} is neither a "
                                  "string nor callable")
        self.world_size_filter = world_size_filter

    def __call__(self, ctx: RankAssignmentCtx) -> RankAssignmentCtx:
        raise RestartError("Tree assigns the whole World at once inside the Wrapper (the "
                           "library's tree over every rank); it cannot be called on one rank's "
                           "context")

    def _policies(self, binding: Binding, index: int) -> List[Policy]:
        keys: Dict[int, List[str]] = {}
        functions = [k for k, layer in enumerate(self.layers) if callable(layer.key_or_fn)]

        def table() -> Dict[int, List[str]]:
            if not keys:
                n = binding.initial_world_size
                me = binding.initial_rank
                first = State(rank=me, world_size=n, initial_rank=me, initial_world_size=n)
                mine = [_key_of(self.layers[k].key_or_fn, first) for k in functions]
                found = gather(binding, f"tree/{index}", mine, list(range(n)), partial=True)
                for r in range(n):
                    # A rank gone before the first assignment: a branch of its
                    # own; iteration 0's fault path terminates it.
                    keys[r] = list(found.get(r, [f"(missing rank {r})"] * len(functions)))
            return keys

        def key_fn(k: int):
            layer = self.layers[k]
            if isinstance(layer.key_or_fn, str):
                return layer.key_or_fn
            column = functions.index(k)
            return lambda initial_rank: table()[initial_rank][column]

        flags = _reserve_flags(self.layers)
        native = [_native_assignment.Layer()]  # the root, over the first layer's branches
        for k, layer in enumerate(self.layers):
            native.append(_native_assignment.Layer(
                min_ranks=int(layer.min_ranks),
                max_ranks=None if layer.max_ranks is None else int(layer.max_ranks),
                key=key_fn(k), flags=LayerFlag(flags[k])))
        return [_native_assignment.Tree(native, self.world_size_filter)]


# ---- the Wrapper's translation ----------------------------------------------

def library_policies(rank_assignment, binding: Binding) -> List[Policy]:
    """The library policies for ``rank_assignment`` (a RankAssignment or a
    Compose of them), in the library's order (the last runs first)."""
    parts = rank_assignment.flatten() if isinstance(rank_assignment, Compose) else [
        rank_assignment]
    for p in parts:
        if not isinstance(p, RankAssignment):
            raise ConfigError(f"rank_assignment: {p!r} is not a RankAssignment (an "
                              "inprocess.rank_assignment class, or a subclass of "
                              "RankAssignment of your own)")
    if len(parts) > 1 and any(isinstance(p, Tree) for p in parts):
        raise ConfigError("rank_assignment: a Tree cannot be composed with other "
                          "RankAssignments (seeds/004)")
    # The library's filters only deactivate; the reference's set every
    # rank's mode by its index. So the first of them to run (the last
    # listed) is preceded by an activation of every healthy rank, unless
    # ActivateAllRanks ran before it.
    applied: List[Policy] = []  # in the order they run
    activated = False
    for i in range(len(parts) - 1, -1, -1):
        p = parts[i]
        if isinstance(p, (MaxActiveWorldSize, ActiveWorldSizeDivisibleBy)) and not activated:
            applied.append(_native_assignment.ActivateAllRanks())
        activated = activated or isinstance(p, (ActivateAllRanks, MaxActiveWorldSize,
                                                ActiveWorldSizeDivisibleBy))
        applied.extend(reversed(p._policies(binding, i)))
    return applied[::-1]


__all__ = ["ActivateAllRanks", "ActiveWorldSizeDivisibleBy", "FillGaps",
           "FilterCountGroupedByKey", "Layer", "LayerFlag", "MaxActiveWorldSize", "RankAssignment",
           "RankAssignmentCtx", "RankDiscarded", "RankFilter", "ShiftRanks", "Tree"]
