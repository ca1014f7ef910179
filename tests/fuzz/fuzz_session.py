"""Fuzz a Kafka connection fed with byte streams (kinspect/wire/session.py, exchange.py): framing,
headers, pairing, SASL, bodies, the whole way to the output records, as decode writes them.

Input: one byte of options (bit 0: a port nobody said is Kafka, so it is detected from the first
bytes; bit 1: bodies not decoded; bit 2: secrets shown; bit 3: a 4 KiB --max-frame; bit 4: both
sides seen from their SYN; bit 5: small bounds), then the events of both directions
(formats.stream_ops). Each output record is completed (bodies decoded), written as JSON Lines
and as decode's text line and tree. Checks: no exception, no hidden one in any problem; no
control character from the input reaches the text (render/safe.py escapes them).
"""

import formats
import harness

with harness.instrumented("kinspect.wire", "kinspect.records", "kinspect.limits"):
    from kinspect.limits import Budget, Limits
    from kinspect.wire.exchange import RAW, complete
    from kinspect.wire.session import KafkaSession
    from kinspect.wire.topics import TopicNames

from kinspect.render.jsonl import dumpb  # noqa: E402
from kinspect.render.text import exchange_line, problem_lines, tree_lines  # noqa: E402

CLIENT, SERVER = b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02"
SMALL = harness.small_limits()


def emit(records: list, topics: TopicNames, budget: Budget) -> None:
    for record in records:
        if RAW in record:
            budget.next_unit()
            complete(record, topics, budget)
        harness.check_tree(record)
        dumpb(record)
        lines = [exchange_line(record).plain, *(line.plain for line in problem_lines(record))]
        if record.get("type") == "exchange":
            lines += tree_lines(record["request"]) + tree_lines(record["response"])
        for line in lines:
            harness.check_text(line)


def target(data: bytes) -> None:
    cursor = formats.Cursor(data)
    options = cursor.u8()
    port = 8000 if options & 1 else 9092
    to_server, to_client = (CLIENT, 40000, SERVER, port), (SERVER, port, CLIENT, 40000)
    session = KafkaSession(decode_bodies=not options & 2, show_secrets=bool(options & 4),
                           max_frame=4096 if options & 8 else 256 << 20)
    topics, budget = TopicNames(), Budget(SMALL if options & 32 else Limits(), len(data))
    ts = 1.0
    emit(session.start(to_server, ts, bool(options & 16)), topics, budget)
    emit(session.start(to_client, ts, bool(options & 16)), topics, budget)
    for kind, reverse, chunk, missing in formats.stream_ops(cursor):
        ts += 0.001
        flow = to_client if reverse else to_server
        if kind == formats.DATA:
            emit(session.data(flow, ts, chunk), topics, budget)
        elif kind == formats.GAP:
            emit(session.gap(flow, ts, missing), topics, budget)
        else:
            emit(session.end(flow, ts, "fin"), topics, budget)
    emit(session.finish(ts), topics, budget)


if __name__ == "__main__":
    harness.main(target, "session", generated=True)
