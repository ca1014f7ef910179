"""The proxy's warnings, folded: the first of a kind is said, the rest only counted, and the
counts said once at the end, so that a response naming 100,000 brokers (or a flood of failed
accepts) gives a few lines, not one per occurrence.

    warnings = Folded(log)
    warnings.warn(("listen", "range"), "cannot listen for broker 7 ...", "brokers not given a listener")
    warnings.ended()   # "warning: 99,999 more brokers not given a listener" (kinds seen twice or more)
"""

from __future__ import annotations

from typing import Callable, Hashable


class Folded:
    def __init__(self, log: Callable[[str], None]):
        self.log = log
        self.counts: dict[Hashable, int] = {}
        self.labels: dict[Hashable, str] = {}

    def warn(self, kind: Hashable, message: str, label: str) -> bool:
        """Says ``message`` the first time ``kind`` comes; after that counts it. ``label`` names
        the kind in the count at the end ("more <label>"). True when the message was said."""
        n = self.counts.get(kind, 0)
        self.counts[kind] = n + 1
        if n:
            return False
        self.labels[kind] = label
        self.log(f"warning: {message}")
        return True

    def ended(self) -> None:
        for kind, n in self.counts.items():
            if n > 1:
                self.log(f"warning: {n - 1:,} more {self.labels[kind]} (warned once above)")
