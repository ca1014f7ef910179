"""Fuzz decode end to end (kinspect/decode/pipeline.py): a capture in, paired and decoded exchanges out,
written as JSON Lines. Every layer at once: capture, link, TCP, session, bodies, records.

Input: one byte of options (bit 0: no detection of Kafka on other ports; bit 1: at most 4 TCP
connections followed; bit 2: small bounds), then a pcap or pcapng file. Checks: no exception but
CaptureUnreadable (the input is not a capture); no hidden exception in any problem.
"""

import io

import harness

with harness.instrumented("kinspect.capture", "kinspect.wire", "kinspect.records",
                          "kinspect.limits", "kinspect.decode.pipeline"):
    from kinspect.limits import Limits
    from kinspect.decode.pipeline import CaptureUnreadable, DecodeRun

from kinspect.render.jsonl import dumpb  # noqa: E402

SMALL = harness.small_limits()


def target(data: bytes) -> None:
    options, capture = (data[0], data[1:]) if data else (0, b"")
    source = io.BytesIO(capture)
    source.name = "<fuzz>"
    run = DecodeRun(source, heuristic=not options & 1, max_connections=4 if options & 2 else 50_000,
                    limits=SMALL if options & 4 else Limits())
    try:
        for record in run.records():
            harness.check_tree(record)
            dumpb(record)
    except CaptureUnreadable:
        return
    harness.check_problems(run.capture_problems)


if __name__ == "__main__":
    harness.main(target, "captures", generated=True)
