"""What the ranks tell each other while they assign ranks.

The library's rank assignment runs on every rank over the whole World, on
the same inputs; a reference policy that needs what only a rank itself
knows (FilterCountGroupedByKey's and Tree's key of a State, a
RankAssignment of the user's computed on its own context) has each rank
publish that through the job's store and read everyone's (an all-gather),
bounded by a timeout: the reference's two store barriers, in one.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Callable, Dict, Optional, Sequence

from ..errors import TimeoutError
from .store import BarrierTimeout, StoreMixin

log = logging.getLogger("nccl_resilient.inprocess")


@dataclasses.dataclass
class Binding:
    """One Wrapper call's context for the Python policies: the store (under
    the call's own prefix), this process's initial rank and the initial
    world, the bound of a gather, and the rank's last state (iteration,
    world size, the previous call's exception)."""

    store: StoreMixin
    initial_rank: int
    initial_world_size: int
    timeout: float
    last_state: Callable[[], object]


def gather(binding: Binding, name: str, value, members: Sequence[int],
           timeout: Optional[float] = None, partial: bool = False) -> Dict[int, object]:
    """Publishes ``value`` (JSON) of this rank under ``name`` and returns
    {rank: value} of every rank in ``members``; after ``timeout`` seconds
    (the binding's when None) BarrierTimeout naming the ranks missing, or
    with ``partial`` the values of those that arrived (a warning names the
    others)."""
    store = binding.store
    store.set(f"{name}/{binding.initial_rank}", json.dumps(value))
    keys = [f"{name}/{r}" for r in members]
    bound = binding.timeout if timeout is None else timeout
    try:
        store.wait(keys, bound)
        arrived = list(members)
    except TimeoutError:
        arrived = [r for r, k in zip(members, keys) if store.check([k])]
        missing = sorted(set(members) - set(arrived))
        text = (f"{name}: ranks {missing} did not arrive within {bound:g} s "
                f"({len(arrived)} of {len(members)} did)")
        if not partial:
            raise BarrierTimeout(text) from None
        log.warning("%s", text)
    return {r: json.loads(store.get(f"{name}/{r}").decode()) for r in arrived}
