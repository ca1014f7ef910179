"""The API versions Kafka 4.0 no longer accepts (KIP-896), derived from Kafka's own message
specs: kinspect/wire/_schemas.py holds, for each version, the 4.x definition where 4.x defines
it and 3.9's otherwise (tools/gen_schemas.py), so the request versions that only 3.9 defines are
the ones 4.x removed. An API that 4.x does not define at all (the ZooKeeper-era inter-broker
APIs) is removed whole."""

from __future__ import annotations

from kinspect.wire._schemas import SCHEMAS

OLD = "3.9"


def _removed() -> dict[int, tuple[int, int]]:
    out = {}
    for key, (_, requests, _) in SCHEMAS.items():
        old = [(first, last) for first, last, _, _, _, source in requests if source == OLD]
        new = [first for first, _, _, _, _, source in requests if source != OLD]
        if not old:
            continue
        low = min(first for first, _ in old)
        high = max(last for _, last in old)
        if new:
            high = min(high, min(new) - 1)
        if high >= low:
            out[key] = (low, high)
    return out


REMOVED: dict[int, tuple[int, int]] = _removed()  # api key -> (lowest, highest) version removed


def removed(api_key: int, api_version: int) -> bool:
    span = REMOVED.get(api_key)
    return span is not None and span[0] <= api_version <= span[1]


def lowest_accepted(api_key: int) -> int | None:
    """The oldest version 4.x accepts; None when 4.x has no such API."""
    for first, _, _, _, _, source in SCHEMAS.get(api_key, (None, (), ()))[1]:
        if source != OLD:
            return first
    return None
