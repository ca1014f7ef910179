"""State kept per group, producer, connection or client, bounded: past ``limit`` entries the
least recently used one is dropped and counted, and the run says what was dropped."""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")

DEFAULT_LIMIT = 100_000  # entries per kind of state (--max-state)


class Bounded(Generic[V]):
    __slots__ = ("kind", "limit", "factory", "items", "dropped")

    def __init__(self, kind: str, limit: int = DEFAULT_LIMIT, factory: Callable[[], V] | None = None):
        self.kind, self.limit, self.factory = kind, limit, factory
        self.items: OrderedDict[Hashable, V] = OrderedDict()
        self.dropped = 0

    def get(self, key) -> V | None:
        value = self.items.get(key)
        if value is not None:
            self.items.move_to_end(key)
        return value

    def at(self, key) -> V:
        """The entry for ``key``, made by ``factory`` when new (the least recently used one goes
        when that makes more than ``limit``)."""
        value = self.items.get(key)
        if value is not None:
            self.items.move_to_end(key)
            return value
        value = self.items[key] = self.factory()
        if len(self.items) > self.limit:
            self.items.popitem(last=False)
            self.dropped += 1
        return value

    def pop(self, key, default=None):
        return self.items.pop(key, default)

    def __contains__(self, key) -> bool:
        return key in self.items

    def __len__(self) -> int:
        return len(self.items)

    def values(self):
        return self.items.values()

    def keys(self):
        return self.items.keys()

    def notice(self, check: str) -> dict | None:
        """The notice saying what was dropped, or None."""
        if not self.dropped:
            return None
        return {"type": "notice", "kind": "bound", "check": check, "state": self.kind,
                "dropped": self.dropped, "limit": self.limit,
                "what": f"{check}: {self.dropped} {self.kind} dropped past the {self.limit} kept "
                        f"(least recently seen first; --max-state raises the bound): what they "
                        f"would have shown is missing"}


def series_add(series: list, point, limit: int) -> None:
    """Append to a time series kept at most ``limit`` points: when full, every other point of
    the older half goes (the shape stays, the resolution of the past halves)."""
    series.append(point)
    if len(series) > limit:
        half = len(series) // 2
        series[:half] = series[:half:2]
