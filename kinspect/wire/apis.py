"""API keys, names, versions and header versions, derived from the generated schema table.

Everything here runs per frame, so the table is flattened once at import into dicts.
Known versions are the union of Kafka 3.9 (from v0) and Kafka 4.2 (keys up to 92).
"""

from __future__ import annotations

from kinspect.wire._errors import ERROR_NAMES
from kinspect.wire._schemas import SCHEMAS

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7

API_NAMES: dict[int, str] = {key: entry[0] for key, entry in SCHEMAS.items()}

# (api_key, api_version) → is that request version flexible (compact strings, tagged fields)
_FLEXIBLE: dict[tuple[int, int], bool] = {
    (key, version): flexible_from is not None and version >= flexible_from
    for key, (_, requests, _) in SCHEMAS.items()
    for first, last, flexible_from, *_ in requests
    for version in range(first, last + 1)
}
# Versions above the newest known: an API that turned flexible stays flexible.
_FLEXIBLE_FROM: dict[int, int | None] = {
    key: requests[-1][2] if requests else None for key, (_, requests, _) in SCHEMAS.items()
}


def api_name(api_key: int) -> str:
    name = API_NAMES.get(api_key)
    return name if name is not None else f"Unknown({api_key})"


def is_known(api_key: int, api_version: int) -> bool:
    return (api_key, api_version) in _FLEXIBLE


def _is_flexible(api_key: int, api_version: int) -> bool:
    flexible = _FLEXIBLE.get((api_key, api_version))
    if flexible is not None:
        return flexible
    if api_key not in _FLEXIBLE_FROM:
        return True  # every API added since KIP-482 is flexible from v0
    flexible_from = _FLEXIBLE_FROM[api_key]
    return flexible_from is not None and api_version >= flexible_from


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if _is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0  # so that a client can always read the broker's supported versions
    return 1 if _is_flexible(api_key, api_version) else 0


def error_name(code: int) -> str:
    name = ERROR_NAMES.get(code)
    return name if name is not None else f"UNKNOWN({code})"
