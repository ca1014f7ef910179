"""__share_group_state records (KIP-932): a share partition's snapshot (type 0) or an update
to it (type 1), keyed by group, topic id and partition.

    record, problems = decode_share_state_record(key, value)

delivery_state in the state batches: 0 available, 2 acknowledged, 4 archived.
"""

from __future__ import annotations

from kinspect.problems import Problem
from kinspect.storage.coordinator_records import decode_coordinator_record
from kinspect.storage.share_schemas import SHARE_RECORD_TYPES

TOPIC = "__share_group_state"


def decode_share_state_record(key: bytes | None, value: bytes | None
                              ) -> tuple[dict, list[Problem]]:
    return decode_coordinator_record(key, value, SHARE_RECORD_TYPES, TOPIC)
