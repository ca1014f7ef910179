"""Where one exchange's time goes in `decode --json -j1`, step by step and per API (not a test).

    python -m tests.bench.profile_exchange CAPTURE [--repeat 3]     # prints JSON; see README

Every step `decode --json` takes for an exchange, each run on its own over all the capture's
exchanges, in the order parallel.finish runs them, with the CPU time of the whole loop divided by
the exchanges (no timer per call, so no timer overhead):

- framing: reading packets, link, TCP reassembly (the stages' "tcp"), shared out by bytes;
- pairing: frames, headers, pairing and the exchange dict (DecodeRun.raw_records, less framing),
  shared out by exchanges;
- body decode: the generated decoders with record sets kept raw (decode_body raw_records=True);
- records: record sets decoded as decode --json has them (regular batches packed), checks on;
  its cost is the full decode_body less the one above;
- topic naming: TopicNames.learn and annotate on response and request;
- error codes: the response's error codes collected and named;
- redaction: secrets.redact;
- filters: the ExchangeFilter decode runs without options (it keeps everything);
- JSON assembly: render.jsonl.pieces (the line's bytes, records' text written by C);
- write: the lines written to /dev/null.

The exchanges are held in memory between the steps, so give a prefix of a large capture
(tests/bench/prefixes.py). Each step runs --repeat times on what the step before left (topic
naming once: it annotates in place); the least CPU counts. The worker hand-off is not here: it is decode -j2's CPU less -j1's,
per exchange (bench_decode.py measures both).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))  # after the snapshot's kinspect (see measure.child_env)

from kinspect.decode.filters import ExchangeFilter  # noqa: E402
from kinspect.decode.pipeline import DecodeRun  # noqa: E402
from kinspect.limits import Budget  # noqa: E402
from kinspect.render import jsonl  # noqa: E402
from kinspect.wire import apis, messages, secrets  # noqa: E402
from kinspect.wire.exchange import RAW, _error_codes  # noqa: E402
from kinspect.wire.topics import TopicNames  # noqa: E402
from tests.bench.stages import _packets  # noqa: E402

GROUPS = ("Produce", "Fetch", "other")


def group_of(record: dict) -> str:
    name = record.get("api_name")
    return name if name in GROUPS else "other"


def cpu(loop) -> float:
    started = time.process_time()
    loop()
    return time.process_time() - started


def raw_exchanges(path: str) -> tuple[list[dict], TopicNames, object]:
    run = DecodeRun(path)
    return [r for r in run.raw_records() if RAW in r], run.topics, run.limits


def decode_bodies(exchanges: list[dict], limits, raw_records: bool) -> list[tuple]:
    """(request body, response body, problems) per exchange, as complete() decodes them."""
    decode = functools.partial(messages.decode_body, raw_records=True) if raw_records else messages.decode_body
    budget = Budget(limits, pack_records=True)
    out = []
    for exchange in exchanges:
        request_payload, request_at, response_payload, response_at, _show = exchange[RAW]
        budget.next_unit()
        budget.grant(len(request_payload) + (len(response_payload) if response_payload is not None else 0))
        body, found = decode(exchange["api_key"], exchange["api_version"], "request", request_payload,
                             start=request_at, budget=budget)
        response = None
        if response_payload is not None:
            response, more = decode(exchange["api_key"], exchange["api_version"], "response",
                                    response_payload, start=response_at, budget=budget)
            found = found + more if found else more
        out.append((body, response, found))
    return out


def measure(path: str, repeat: int) -> dict:
    steps: dict[str, dict[str, float]] = {}

    def best(name: str, run_for_group) -> None:
        for group in GROUPS:
            costs = [run_for_group(group) for _ in range(repeat)]
            steps.setdefault(name, {})[group] = min(costs)

    framing = min(cpu(lambda: _packets(path, link=True, tcp=True)) for _ in range(repeat))
    paired = []
    for _ in range(repeat):
        started = time.process_time()
        exchanges, _topics, limits = raw_exchanges(path)
        paired.append(time.process_time() - started)
    count = Counter(group_of(e) for e in exchanges)
    by_group = {g: [e for e in exchanges if group_of(e) == g] for g in GROUPS}
    # framing works per packet, shared out by the exchanges' bytes; pairing per exchange
    size = {g: sum(e["request_size"] + (e.get("response_size") or 0) for e in by_group[g]) for g in GROUPS}
    total, exchanges_in_all = sum(size.values()) or 1, len(exchanges) or 1
    steps["framing (read, link, TCP)"] = {g: framing * size[g] / total for g in GROUPS}
    steps["pairing (frames, headers, exchange dict)"] = {
        g: (min(paired) - framing) * count[g] / exchanges_in_all for g in GROUPS}

    best("body decode (generated decoders, record sets raw)",
         lambda g: cpu(lambda: decode_bodies(by_group[g], limits, raw_records=True)))
    decoded = {g: decode_bodies(by_group[g], limits, raw_records=False) for g in GROUPS}
    full = {g: min(cpu(lambda: decode_bodies(by_group[g], limits, raw_records=False)) for _ in range(repeat))
            for g in GROUPS}
    steps["records (decompress, CRC, scan, checks)"] = {
        g: full[g] - steps["body decode (generated decoders, record sets raw)"][g] for g in GROUPS}

    def finished(g: str) -> list[dict]:
        """The group's exchanges as complete() leaves them (fresh dicts, bodies shared)."""
        out = []
        for exchange, (body, response, found) in zip(by_group[g], decoded[g]):
            done = {k: v for k, v in exchange.items() if k != RAW}
            done["problems"] = list(done["problems"]) + [{"side": "request", "what": p.what} for p in found or ()]
            done["request"], done["response"] = body, response
            out.append(done)
        return out

    # once, in place (annotating adds the names the output carries), the groups that teach names first
    topics, naming = TopicNames(), {}
    for g in ("other", "Produce", "Fetch"):
        def loop(g=g):
            for exchange, (body, response, _found) in zip(by_group[g], decoded[g]):
                if response is not None:
                    topics.learn(exchange["api_key"], response)
                    topics.annotate(response)
                topics.annotate(body)
        naming[g] = cpu(loop)
    steps["topic naming (learn, annotate)"] = naming

    def error_codes(g: str) -> float:
        def loop():
            for _b, response, _f in decoded[g]:
                if response is not None:
                    codes: list[int] = []
                    _error_codes(response, codes)
                    if codes:
                        list(dict.fromkeys(apis.error_name(c) for c in codes))
        return cpu(loop)

    best("error codes", error_codes)

    def redaction(g: str) -> float:
        items = [(e["api_key"], b, r) for e, (b, r, _f) in zip(by_group[g], decoded[g])]
        return cpu(lambda: [secrets.redact(k, b, r) for k, b, r in items])

    best("redaction (secrets.redact)", redaction)
    keep = ExchangeFilter()
    records = {g: finished(g) for g in GROUPS}

    def filters(g: str) -> float:
        def loop():
            for record in records[g]:
                problems = record.get("problems")
                _error = bool(problems) and any(p.get("severity") == "error" for p in problems)
                keep(record)
        return cpu(loop)

    best("filters (ExchangeFilter, error flag)", filters)
    best("JSON assembly (render.jsonl.pieces)",
         lambda g: cpu(lambda: [jsonl.pieces(r, newline=True) for r in records[g]]))
    lines = {g: [b"".join(jsonl.pieces(r, newline=True)) for r in records[g]] for g in GROUPS}

    def write(g: str) -> float:
        with open("/dev/null", "wb") as out:
            return cpu(lambda: [out.write(line) for line in lines[g]])

    best("write (/dev/null)", write)
    per = {name: {g: round(v / count[g] * 1e6, 2) if count[g] else None for g, v in by.items()}
           for name, by in steps.items()}
    return {"exchanges": dict(count), "bytes": size, "repeat": repeat,
            "cpu_s": {name: {g: round(v, 4) for g, v in by.items()} for name, by in steps.items()},
            "us_per_exchange": per,
            "us_per_exchange_total": {g: round(sum(p[g] for p in per.values() if p[g] is not None), 2)
                                      for g in GROUPS},
            "json_bytes": {g: sum(map(len, lines[g])) for g in GROUPS}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("capture")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.capture, args.repeat), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
