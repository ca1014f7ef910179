"""Fuzz request and response bodies (kinspect/wire/messages.py), every API version.

Input: two bytes choosing (api_key, version, kind) among those kinspect defines (sorted), one
byte of options (bit 0: record sets kept raw; bit 1: no record checks; bit 2: small bounds, a
few array entries and records; bit 3: no budget at all), then the body. After decoding, what
exchange.complete does next: secrets redacted, topic ids learned and named, and the JSON Lines
line written. Checks: no exception, and no exception turned into a "decoder error" problem; a
body that decodes without a problem (record sets raw) encodes (wire/encode.py) to bytes that
decode to the same fields.
"""

import harness

with harness.instrumented("kinspect.wire", "kinspect.records", "kinspect.limits"):
    from kinspect.limits import Budget, Limits
    from kinspect.wire import messages, secrets
    from kinspect.wire.encode import encode_body
    from kinspect.wire.topics import TopicNames

from kinspect.render.jsonl import dumpb  # noqa: E402

BODY_KINDS = sorted(messages.DEFINED)  # as seeds.py numbers them
SMALL = harness.small_limits()


def target(data: bytes) -> None:
    if len(data) < 3:
        return
    api_key, version, kind = BODY_KINDS[int.from_bytes(data[:2], "big") % len(BODY_KINDS)]
    options, body = data[2], data[3:]
    budget = None if options & 8 else Budget(SMALL if options & 4 else Limits(), len(body))
    decoded, problems = messages.decode_body(api_key, version, kind, body,
                                             raw_records=bool(options & 1),
                                             record_checks=not options & 2, budget=budget)
    harness.check_problems(problems)
    if options & 1 and not problems:
        again = messages.decode_body(api_key, version, kind, encode_body(api_key, version, kind, decoded),
                                     raw_records=True)
        harness.agree("decode → encode → decode", again, (decoded, []), ("again", "first"))
    secrets.redact_body(api_key, kind, decoded)
    topics = TopicNames()
    topics.learn(api_key, decoded)
    topics.annotate(decoded)
    dumpb({"body": decoded, "problems": [p.to_dict() for p in problems]})


if __name__ == "__main__":
    harness.main(target, "messages", generated=True)
