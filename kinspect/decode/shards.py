"""Whether runs of a capture's connections in K shards (pipeline.DecodeRun's ``flows``) together
give one whole run's records, from each shard's ``flows_report()``.

A shard decodes only its own connections. Its records are the whole run's for those connections
unless something shared by all connections would have acted otherwise:
- a bound on what all connections hold at once (directions open, out-of-order bytes, requests
  waiting for responses, ...): the whole run holds at any moment no more than the shards' peaks
  added up, so while that sum stays within a bound, the bound never acted there;
- topic names: a Fetch or Produce v13+ names topics by id, from the responses decoded before it,
  on any connection. A lookup that found no name in one shard would have found one in the whole
  run if another shard learned the id before it; two names for one id make the order matter.
The notices of connections still open at the capture's end are capped per kind across all
connections (pipeline.NOTICES_AT_ONCE): ``end_problems`` gives the whole run's count of them.
"""

from __future__ import annotations

from collections import Counter

from kinspect.decode.pipeline import NOTICES_AT_ONCE


def not_whole(reports: list[dict]) -> list[str]:
    """Why the shards' records might not be one run's; empty when they are."""
    reasons = []
    limits = reports[0]["limits"]
    for bound, limit in limits.items():
        together = sum(r["peaks"][bound] for r in reports)
        if together > limit:
            reasons.append(f"{bound}: up to {together} in the shards together, past the bound of {limit}")
    if any(r["overflow"] for r in reports):
        reasons.append("too many topic ids to follow across shards")
        return reasons
    first: dict[str, int] = {}
    names: dict[str, set] = {}
    for r in reports:
        for topic_id, (position, learned) in r["learned"].items():
            first[topic_id] = min(position, first.get(topic_id, position))
            names.setdefault(topic_id, set()).update(learned)
    for topic_id, seen in names.items():
        if len(seen) > 1:
            reasons.append(f"topic id {topic_id} was given {len(seen)} names")
    for r in reports:
        for topic_id, position in r["unnamed"].items():
            if first.get(topic_id, position + 1) <= position:
                reasons.append(f"topic id {topic_id} was named on another shard's connection before it was looked up")
    return reasons


def end_problems(reports: list[dict]) -> int:
    """The records the whole run gives for the notices of connections open at the capture's end:
    the first NOTICES_AT_ONCE of each kind, and one counting the rest."""
    counts: Counter = Counter()
    for r in reports:
        counts.update(r["end_notices"])
    return sum(min(n, NOTICES_AT_ONCE) + (n > NOTICES_AT_ONCE) for n in counts.values())
