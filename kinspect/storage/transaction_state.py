"""__transaction_state records: TransactionLogKey (the transactional id) and TransactionLogValue.

    record, problems = decode_transaction_record(key, value)

The value's transaction_status is Kafka's TransactionState id; ``state`` names it.
"""

from __future__ import annotations

from kinspect.problems import Problem
from kinspect.storage._record_schemas import TRANSACTION_RECORD_TYPES
from kinspect.storage.coordinator_records import decode_coordinator_record

TOPIC = "__transaction_state"
STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
          5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


def decode_transaction_record(key: bytes | None, value: bytes | None
                              ) -> tuple[dict, list[Problem]]:
    record, problems = decode_coordinator_record(key, value, TRANSACTION_RECORD_TYPES, TOPIC)
    state = record["value"].get("transaction_status") if isinstance(record["value"], dict) else None
    if state is not None:
        record["state"] = STATES.get(state, f"UNKNOWN({state})")
    return record, problems
