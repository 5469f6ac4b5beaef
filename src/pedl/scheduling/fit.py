"""The one fit model that the scheduler and the scaling decider share: bins (agents, instances) with
total and free slots, and how a request of n slots is placed on them, so the two never disagree.

A request goes on one bin (best or worst fit); failing that, a gang goes on the fewest completely free
bins, of mixed sizes, whose slots add up exactly to its need. Preferred bins (spot) are tried before the
others whatever their fit; among equally good bins one that is partly used goes before a wholly free
one (kept whole for gangs), and a request that does not need the capability (containers) takes a bin
without it first (kept for requests that do)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from itertools import islice
from typing import Generic, Literal, TypeVar

Fitting = Literal["best", "worst"]
K = TypeVar("K", bound=Hashable)  # a bin's id


class SlotBins(Generic[K]):
    """Bins keyed by id, bucketed by (rank, capable, free count), so a fit is a walk over at most
    max-slots counts per class present instead of over every bin (1,000 bins x 10,000 requests stays
    fast). Each bucket holds two insertion-ordered sets: partly used bins, then wholly free ones."""

    def __init__(self) -> None:
        self.free: dict[K, int] = {}
        self.total: dict[K, int] = {}
        self.free_total = 0  # free slots over all bins
        self.max_free = 0  # no bin has more free slots (an upper bound: it never shrinks)
        self._class: dict[K, tuple[int, bool]] = {}  # bin -> (rank: 0 preferred, 1 not; capable)
        self._buckets: dict[tuple[int, bool, int], tuple[dict[K, None], dict[K, None]]] = {}
        self._ranks: list[int] = []  # ranks present, preferred first
        self._capable_orders: tuple[tuple[bool, ...], tuple[bool, ...]] = ((), ())  # (any request, capable only)

    def __len__(self) -> int:
        return len(self.free)

    def add(self, key: K, total: int, free: int, *, preferred: bool = False, capable: bool = True) -> None:
        """A new bin with `total` slots of which `free` are free. `capable`: it takes requests that need
        the capability (the scheduler: the agent runs containers)."""
        rank = 0 if preferred else 1
        self.free[key], self.total[key] = free, total
        self._class[key] = (rank, capable)
        self.free_total += free
        self.max_free = max(self.max_free, free)
        self._bucket(rank, capable, free)[free == total][key] = None
        if rank not in self._ranks:
            self._ranks = sorted([*self._ranks, rank])
        if capable not in self._capable_orders[0]:
            present = {*self._capable_orders[0], capable}
            self._capable_orders = (
                tuple(c for c in (False, True) if c in present),  # without the capability first
                (True,) if True in present else (),
            )

    def _bucket(self, rank: int, capable: bool, free: int) -> tuple[dict[K, None], dict[K, None]]:
        entry = self._buckets.get((rank, capable, free))
        if entry is None:
            entry = self._buckets[(rank, capable, free)] = ({}, {})
        return entry

    def take(self, key: K, n: int) -> None:
        """Take n of the bin's free slots."""
        old = self.free[key]
        rank, capable = self._class[key]
        del self._buckets[(rank, capable, old)][old == self.total[key]][key]
        self.free[key] = old - n
        self.free_total -= n
        self._bucket(rank, capable, old - n)[old - n == self.total[key]][key] = None

    def fit_one(self, need: int, fitting: Fitting = "best", *, capable_only: bool = False) -> K | None:
        """The bin that takes `need` slots on its own: preferred bins first; among them the one with
        the fewest free slots that still has room (best) or the most (worst)."""
        counts = range(need, self.max_free + 1) if fitting == "best" else range(self.max_free, need - 1, -1)
        caps = self._capable_orders[capable_only]
        buckets = self._buckets
        for rank in self._ranks:
            for count in counts:
                for capable in caps:
                    entry = buckets.get((rank, capable, count))
                    if entry is not None:
                        partial, whole = entry
                        if partial:
                            return next(iter(partial))
                        if whole:
                            return next(iter(whole))
        return None

    def fullest(self, *, capable_only: bool = False, usable: Callable[[K], bool] | None = None) -> K | None:
        """The bin with the fewest free slots, even none (for a request of no slots), preferred first
        among equals; with `usable`, the first such bin it accepts."""
        caps = self._capable_orders[capable_only]
        for count in range(0, self.max_free + 1):
            for rank in self._ranks:
                for capable in caps:
                    entry = self._buckets.get((rank, capable, count))
                    if entry is None:
                        continue
                    if usable is None:
                        if entry[0] or entry[1]:
                            return next(iter(entry[0] or entry[1]))
                        continue
                    found = next((k for part in entry for k in part if usable(k)), None)
                    if found is not None:
                        return found
        return None

    def fit_whole(self, need: int, *, capable_only: bool = False) -> list[K] | None:
        """The fewest wholly free bins whose slots add up exactly to `need` (a bounded knapsack over
        bin sizes, so 3+3 is found for 6 even when a 4-slot bin is free), preferred bins first."""
        if need <= 0 or need > self.free_total:
            return None
        caps = self._capable_orders[capable_only]
        count: dict[int, int] = {}  # size -> wholly free bins of that size (as many as could be used)
        for size in range(1, min(need, self.max_free) + 1):
            n = sum(
                len(entry[1])
                for rank in self._ranks
                for capable in caps
                if (entry := self._buckets.get((rank, capable, size))) is not None
            )
            if n:
                count[size] = min(n, need // size)
        if sum(size * n for size, n in count.items()) < need:
            return None
        best: dict[int, list[int]] = {0: []}  # slots reached -> the bin sizes used, fewest bins
        for size, n in sorted(count.items(), reverse=True):
            grown = dict(best)
            for reached, used in best.items():
                for k in range(1, n + 1):
                    total = reached + k * size
                    if total > need:
                        break
                    if total not in grown or len(used) + k < len(grown[total]):
                        grown[total] = used + [size] * k
            best = grown
        if need not in best:
            return None
        wanted: dict[int, int] = {}
        for size in best[need]:
            wanted[size] = wanted.get(size, 0) + 1
        out: list[K] = []
        for size, n in wanted.items():
            for rank in self._ranks:
                for capable in caps:
                    entry = self._buckets.get((rank, capable, size))
                    if entry is not None and n:
                        got = list(islice(entry[1], n))
                        out += got
                        n -= len(got)
        return out

    def place(self, need: int, fitting: Fitting = "best", *, capable_only: bool = False) -> list[tuple[K, int]] | None:
        """Place a request and take its slots: on one bin if one has room, else as a gang over whole
        bins; a request of no slots goes on the fullest bin. None: it does not fit now."""
        if need == 0:
            key = self.fullest(capable_only=capable_only)
            return None if key is None else [(key, 0)]
        if need <= self.max_free:
            key = self.fit_one(need, fitting, capable_only=capable_only)
            if key is not None:
                self.take(key, need)
                return [(key, need)]
        keys = self.fit_whole(need, capable_only=capable_only)
        if not keys:
            return None
        out: list[tuple[K, int]] = []
        for key in keys:
            n = self.total[key]
            self.take(key, n)
            out.append((key, n))
        return out
