"""Exchanges as decode finishes them, built by hand for edge cases (the shapes decode --json
prints: see pcaps/ for real ones)."""

from __future__ import annotations

from kinspect.wire.apis import api_name

CLIENT = "10.0.0.5:50000"
BROKER = "10.0.0.9:9092"


def exchange(api_key: int, request: dict, response: dict | None = None, *, at: float = 1000.0,
             latency_ms: float = 2.0, client_id: str = "app", conn: str | None = None, version: int = 9,
             correlation_id: int = 1, error_codes=()) -> dict:
    return {"type": "exchange", "conn": conn or f"{CLIENT}-{BROKER}", "api_key": api_key,
            "api_name": api_name(api_key), "api_version": version, "correlation_id": correlation_id,
            "client_id": client_id, "request_time": at,
            "response_time": None if response is None else at + latency_ms / 1000,
            "latency_ms": None if response is None else latency_ms, "request": request,
            "response": response, "error_codes": list(error_codes), "problems": []}


def join(group, member, generation, at, leader_members=None, error=0, reason=None, conn=None):
    request = {"group_id": group, "member_id": member, "session_timeout_ms": 6000}
    if reason:
        request["reason"] = reason
    response = {"error_code": error, "generation_id": generation if not error else -1, "member_id": member,
                "members": [{"member_id": m} for m in leader_members or ()]}
    return exchange(11, request, response, at=at, conn=conn)


def sync(group, member, generation, at, error=0):
    return exchange(14, {"group_id": group, "generation_id": generation, "member_id": member},
                    {"error_code": error}, at=at)


def heartbeat(group, member, generation, at, error=0):
    return exchange(12, {"group_id": group, "generation_id": generation, "member_id": member},
                    {"error_code": error}, at=at)


def leave(group, member, at, reason=None):
    return exchange(13, {"group_id": group, "members": [{"member_id": member, "reason": reason}]},
                    {"error_code": 0}, at=at)


def batch(base_offset=0, count=1, producer_id=-1, epoch=-1, sequence=-1, transactional=False,
          timestamp=1_700_000_000_000, control=False):
    return {"magic": 2, "base_offset": base_offset, "last_offset_delta": count - 1, "records_count": count,
            "producer_id": producer_id, "producer_epoch": epoch, "base_sequence": sequence,
            "is_transactional": transactional, "is_control": control, "base_timestamp": timestamp,
            "max_timestamp": timestamp + count - 1}


def produce(topic, partition, batches, *, base_offset=0, error=0, at=1000.0, transactional_id=None,
            client_id="app", conn=None, correlation_id=1, throttle_ms=0):
    request = {"transactional_id": transactional_id, "acks": -1,
               "topic_data": [{"topic": topic, "partition_data": [{"index": partition, "records": batches}]}]}
    response = {"responses": [{"topic": topic, "partition_responses": [
        {"index": partition, "error_code": error, "base_offset": base_offset if not error else -1,
         "log_append_time_ms": -1}]}], "throttle_time_ms": throttle_ms}
    return exchange(0, request, response, at=at, client_id=client_id, conn=conn, correlation_id=correlation_id)


def commit(group, topic, partition, offset, at, error=0):
    request = {"group_id": group, "topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "committed_offset": offset}]}]}
    response = {"topics": [{"name": topic, "partitions": [{"partition_index": partition, "error_code": error}]}]}
    return exchange(8, request, response, at=at)


def fetch(topic, partition, high_watermark, at, batches=(), isolation=0, stable=None, max_wait_ms=500,
          latency_ms=2.0, client_id="app"):
    request = {"max_wait_ms": max_wait_ms, "isolation_level": isolation,
               "topics": [{"topic": topic, "partitions": [{"partition": partition}]}]}
    response = {"throttle_time_ms": 0, "error_code": 0, "responses": [{"topic": topic, "partitions": [
        {"partition_index": partition, "error_code": 0, "high_watermark": high_watermark,
         "last_stable_offset": high_watermark if stable is None else stable, "records": list(batches)}]}]}
    return exchange(1, request, response, at=at, latency_ms=latency_ms, client_id=client_id)
