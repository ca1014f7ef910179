"""The matrix of issue 10's hostile tests: every hostile input with every command that reads
its kind, and what each run must show.

An input is a capture (decode, validate, offsets --capture), a segment file (dump, validate)
or a broker log dir (dump, validate, offsets --log-dir). ``cut_by`` names the commands that must
meet a bound on that input, and ``cuts`` the options one of which their output must then name.

Two scales: "full" makes each input as large as issue 10 names it (9 million records, 10
million array entries; tests/bench/hostile.py's default), "ci" (the default of the tests, or
KINSPECT_HOSTILE_SCALE=full) makes the inputs that cost time in proportion to their counts
smaller, still past kinspect's default bounds (100,000 records held, 200,000 array entries,
the TCP directions of --max-connections), so that the whole matrix runs in a few minutes. The memory check bites
hardest at the full scale, where holding every record would take gigabytes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kinspect.decode.pipeline import MAX_CONNECTIONS
from tests.conftest import PCAPS
from tests.hostile import (inputs, inputs_avro_json, inputs_protobuf_json, inputs_proxy, inputs_schemas, inputs_tls,
                           inputs_wire, runner)

# 4 is documented ("kinspect could not finish": a worker died, an internal error), but on these
# inputs it is what the issue forbids: a bound not held, or a crash by another name.
ACCEPTED_EXIT_CODES = frozenset({0, 1, 2, 3})
SCALE = os.environ.get("KINSPECT_HOSTILE_SCALE", "ci")
# past the directions --max-connections follows by default (two per connection; a half-open
# connection has one), so that the bound cuts at the ci scale too
HALF_OPEN = 2 * MAX_CONNECTIONS + 10_000

# name → arguments; arguments() fills in "{input}" and "{junit}"
CAPTURE_COMMANDS = {
    "decode": ["decode", "{input}"],
    "decode-v": ["decode", "-v", "{input}"],
    "decode-j2": ["decode", "-j2", "{input}"],  # text asks for workers: -j is for --json and --summary
    "decode-json": ["decode", "--json", "{input}"],
    "decode-json-j1": ["decode", "--json", "-j1", "{input}"],
    "decode-summary": ["decode", "--summary", "{input}"],
    "validate": ["validate", "{input}"],
    "validate-json-junit": ["validate", "--json", "--junit", "{junit}", "{input}"],
    "offsets-capture": ["offsets", "--capture", "{input}"],
}
FILE_COMMANDS = {
    "dump": ["dump", "{input}"],
    "dump-records": ["dump", "--records", "{input}"],
    "dump-records-json": ["dump", "--records", "--json", "{input}"],
    "dump-kafka": ["dump", "--format", "kafka", "{input}"],
    "validate": ["validate", "{input}"],
    "validate-json-junit": ["validate", "--json", "--junit", "{junit}", "{input}"],
}
LOG_DIR_COMMANDS = {**FILE_COMMANDS, "offsets-logdir": ["offsets", "--log-dir", "{input}"],
                    "dump-data-json": ["dump", "--data", "--json", "{input}"]}
# a key log given with a real capture (round two: key logs are input too)
KEYLOG_CAPTURE = str(PCAPS / "librdkafka-mtu1500.pcap")
KEYLOG_COMMANDS = {
    "decode-json-keylog": ["decode", "--json", "--keylog", "{input}", KEYLOG_CAPTURE],
    "validate-keylog": ["validate", "--keylog", "{input}", KEYLOG_CAPTURE],
    "offsets-capture-keylog": ["offsets", "--capture", KEYLOG_CAPTURE, "--keylog", "{input}"],
}
COMMANDS = {"capture": CAPTURE_COMMANDS, "segment": FILE_COMMANDS, "logdir": LOG_DIR_COMMANDS,
            "keylog": KEYLOG_COMMANDS}
# Where strings from the input are printed: keys, values and headers need --data, and a
# pseudo-terminal (rich's styled output) is where an escape sequence would act.
STRING_COMMANDS = {
    "capture": {"decode-v-tty": ["decode", "-v", "{input}"],
                "offsets-capture-tty": ["offsets", "--capture", "{input}"]},
    "segment": {"dump-data": ["dump", "--data", "{input}"],
                "dump-data-kafka": ["dump", "--data", "--format", "kafka", "{input}"],
                "dump-data-tty": ["dump", "--data", "{input}"]},
}
STRING_COMMANDS["keylog"] = {}
STRING_COMMANDS["logdir"] = {**STRING_COMMANDS["segment"],
                             "offsets-logdir-tty": ["offsets", "--log-dir", "{input}"]}

DECODES_BODIES = ("decode-v", "decode-json", "decode-json-j1")
SEGMENT_DECOMPRESSES = ("validate", "validate-json-junit", "dump-records", "dump-records-json")
CAPTURE_DECOMPRESSES = (*DECODES_BODIES, "validate", "validate-json-junit")
ALL_DECODES = ("decode", *DECODES_BODIES, "decode-summary")
DECOMPRESSION_OPTIONS = ("--max-batch-bytes", "--max-ratio")


@dataclass(frozen=True)
class Hostile:
    name: str
    generate: Callable[..., Path]  # (root, count=...) → the input's path
    kind: str  # capture, segment, logdir
    cuts: tuple[str, ...] = ()  # options (or their prefixes) of which the output names one ...
    cut_by: tuple[str, ...] = ()  # ... in these commands
    strings: bool = False  # carries strings (escapes, non-UTF-8) to show: add STRING_COMMANDS
    ci_count: int | None = None  # the generator's count at the "ci" scale

    def make(self, root: Path, scale: str = SCALE) -> Path:
        if scale == "ci" and self.ci_count is not None:
            return self.generate(root, count=self.ci_count)
        return self.generate(root)

    def commands(self) -> dict[str, list[str]]:
        return {**COMMANDS[self.kind], **(STRING_COMMANDS[self.kind] if self.strings else {})}


HOSTILE = (
    # record-count amplification
    Hostile("amplified-produce-v3", inputs.amplified_produce_v3, "capture", ci_count=120_000),
    Hostile("amplified-produce-v9", inputs.amplified_produce_v9, "capture", ci_count=120_000),
    Hostile("amplified-fetch-v12", inputs.amplified_fetch_v12, "capture", ci_count=120_000),
    Hostile("amplified-segment", inputs.amplified_segment, "segment", ci_count=120_000),
    Hostile("amplified-valid-segment", inputs.amplified_valid_segment, "segment", ci_count=120_000),
    Hostile("amplified-plain-segment", inputs.amplified_plain_segment, "segment", ci_count=120_000),
    Hostile("amplified-offsets-logdir", inputs.amplified_offsets_log_dir, "logdir", ci_count=120_000),
    Hostile("malformed-records-produce", inputs.malformed_records_produce, "capture", ci_count=120_000),
    Hostile("non-utf8-header-keys-segment", inputs.non_utf8_header_keys_segment, "segment", ci_count=120_000),
    # array amplification
    Hostile("array-produce-request", inputs.array_produce_request, "capture",
            ("--max-items",), DECODES_BODIES, ci_count=1_000_000),
    Hostile("array-offset-commit-response", inputs.array_offset_commit_response, "capture",
            ("--max-items",), (*DECODES_BODIES, "offsets-capture"), ci_count=1_000_000),
    # out-of-order storms
    Hostile("out-of-order-storm", inputs.out_of_order_storm, "capture"),
    Hostile("out-of-order-storm-acks", inputs.out_of_order_storm_acks, "capture"),
    # decompression
    Hostile("zeros-2000-batches-segment", inputs.zeros_segment, "segment",
            ("--max-",), SEGMENT_DECOMPRESSES),  # a ratio or a per-file bound, whatever its name
    Hostile("zeros-dense-batches-segment", inputs.zeros_dense_segment, "segment",
            ("--max-",), SEGMENT_DECOMPRESSES, ci_count=12),
    Hostile("bombs-segment", inputs.bombs_segment, "segment", DECOMPRESSION_OPTIONS,
            SEGMENT_DECOMPRESSES),
    Hostile("bombs-produce", inputs.bombs_produce, "capture", DECOMPRESSION_OPTIONS,
            CAPTURE_DECOMPRESSES),
    # 2 GiB length fields
    Hostile("len2g-frame", inputs.lying_frame_size, "capture"),
    Hostile("len2g-array", inputs.lying_array_counts, "capture"),
    Hostile("len2g-string", inputs.lying_string_lengths, "capture"),
    Hostile("len2g-pcap-record", inputs.lying_pcap_record, "capture"),
    Hostile("len2g-pcapng-block", inputs.lying_pcapng_block, "capture"),
    Hostile("len2g-batch-segment", inputs.lying_batch_length, "segment"),
    Hostile("len2g-record-segment", inputs.lying_record_lengths, "segment"),
    # half-open connections
    Hostile("half-open-syn", inputs.half_open_syn, "capture", ("--max-connections",), ALL_DECODES,
            ci_count=HALF_OPEN),
    Hostile("half-open-partial", inputs.half_open_partial, "capture", ("--max-connections",),
            ALL_DECODES, ci_count=HALF_OPEN),
    # many batches, legacy nesting
    Hostile("many-batches-produce", inputs.many_batches_produce, "capture", ci_count=50_000),
    Hostile("legacy-nesting-segment", inputs.legacy_nesting_segment, "segment"),
    Hostile("legacy-amplified-segment", inputs.legacy_amplified_segment, "segment", ci_count=120_000),
    Hostile("legacy-produce-v2", inputs.legacy_produce_v2, "capture", ci_count=120_000),
    # timestamps, names, strings
    Hostile("year-11476-pcapng", inputs.far_future_pcapng, "capture"),
    Hostile("non-utf8-file-name", inputs.non_utf8_file_name, "capture"),
    Hostile("non-utf8-segment-name", inputs.non_utf8_segment_name, "segment", strings=True),
    Hostile("non-utf8-logdir", inputs.non_utf8_log_dir, "logdir", strings=True),
    Hostile("non-utf8-strings-capture", inputs.non_utf8_strings_capture, "capture", strings=True),
    Hostile("escapes-capture", inputs.escapes_capture, "capture", strings=True),
    Hostile("escapes-segment", inputs.escapes_segment, "segment", strings=True),
    Hostile("escapes-logdir", inputs.escapes_log_dir, "logdir", strings=True),
)


def _scaled(generate: Callable[..., Path], parameter: str) -> Callable[..., Path]:
    """A generator of round two, its size parameter given as the matrix's ``count``."""
    def make(root: Path, count: int | None = None) -> Path:
        return generate(root) if count is None else generate(root, **{parameter: count})
    make.__name__ = generate.__name__
    return make


GZIP_BOUND = ("--max-file-ratio",)
ROUND_TWO = (
    # issue 30: the outer gzip of a capture, notices and orphans folded per connection
    Hostile("zeros-9mb-pcap-gz", _scaled(inputs_wire.zeros_pcap_gz, "size"), "capture", GZIP_BOUND,
            tuple(CAPTURE_COMMANDS)),
    Hostile("empty-packets-gzip-bomb", _scaled(inputs_wire.empty_packets_gzip_bomb, "compressed"), "capture",
            GZIP_BOUND, tuple(CAPTURE_COMMANDS)),
    Hostile("empty-records-gzip-bomb", _scaled(inputs_wire.empty_records_gzip_bomb, "compressed"), "capture",
            GZIP_BOUND, tuple(CAPTURE_COMMANDS)),
    Hostile("zeros-gzip-bomb", _scaled(inputs_wire.zeros_gzip_bomb, "compressed"), "capture", GZIP_BOUND,
            tuple(CAPTURE_COMMANDS)),
    Hostile("tiny-requests-gzip-bomb", _scaled(inputs_wire.tiny_requests_gzip_bomb, "compressed"), "capture",
            GZIP_BOUND, tuple(CAPTURE_COMMANDS), ci_count=1_000_000),
    Hostile("malformed-blocks-pcapng-gz", _scaled(inputs_wire.malformed_blocks_pcapng_gz, "compressed"),
            "capture", GZIP_BOUND, tuple(CAPTURE_COMMANDS)),
    Hostile("orphan-responses-gz", _scaled(inputs_wire.orphan_responses_gz, "size"), "capture"),
    # honest volume, not an attack: 730,000 different requests (a per-byte budget, not 20 s)
    Hostile("tiny-requests-random-ids", _scaled(inputs_wire.tiny_requests_random_ids, "compressed"),
            "capture", ci_count=300_000),
    # TLS and key logs
    Hostile("junk-keylog", _scaled(inputs_tls.junk_keylog, "size"), "keylog", ci_count=16 << 20),
    Hostile("junk-dsb-pcapng-gz", _scaled(inputs_tls.junk_dsb_pcapng_gz, "size"), "capture",
            ci_count=16 << 20),
    Hostile("one-byte-hellos-pcap-gz", _scaled(inputs_tls.one_byte_hellos_pcap_gz, "hellos"), "capture",
            ci_count=8),
    Hostile("damaged-tls-records-pcapng", _scaled(inputs_tls.damaged_records_pcapng, "size"), "capture",
            ci_count=2 << 20),
    # the proxy's crafted Metadata, read back from a capture; a log dir of hostile schemas
    Hostile("metadata-100k-brokers-pcap-gz", _scaled(inputs_proxy.metadata_brokers_pcap_gz, "brokers"),
            "capture", strings=True, ci_count=20_000),
    Hostile("hostile-schemas-logdir", inputs_schemas.schema_log_dir, "logdir"),
    # issue 33's C readers of schema values: payloads built to hurt a reader writing JSON from bytes
    Hostile("avro-json-hostile", inputs_avro_json.avro_json_capture, "capture"),
    Hostile("protobuf-json-hostile", inputs_protobuf_json.protobuf_json_capture, "capture"),
)
HOSTILE = HOSTILE + ROUND_TWO
BY_NAME = {h.name: h for h in HOSTILE}


def matrix() -> list[tuple[str, str]]:
    """Every (input, command) pair, in a stable order."""
    return [(h.name, command) for h in HOSTILE for command in h.commands()]


def arguments(hostile: Hostile, command: str, path: Path, junit: Path) -> list:
    """The argument list of one run: paths as bytes, so that any file name passes as it is."""
    template = hostile.commands()[command]
    values = {"{input}": bytes(path), "{junit}": bytes(junit)}
    return [values.get(arg, arg) for arg in template]


def is_terminal(command: str) -> bool:
    return command.endswith("-tty")


def is_json(command: str) -> bool:
    return "json" in command


def problems(hostile: Hostile, command: str, run, junit: Path | None) -> list[str]:
    """Everything wrong with one run; empty when it passed. Timings are never judged."""
    found = []
    if run.timed_out:
        found.append(f"hang: killed after {run.wall:.0f} s")
    elif run.exit_code is None:
        found.append(f"killed by signal {run.signal}")
    elif run.exit_code not in ACCEPTED_EXIT_CODES:
        found.append(f"exit code {run.exit_code}")
    if run.stderr.crash or run.stdout.crash:
        found.append("traceback or fatal error")
    if re.search(rb"internal error", bytes(run.stderr.head) + run.stderr.tail):
        found.append("internal error")
    if run.peak_rss >= runner.RSS_TARGET:
        found.append(f"peak RSS {run.peak_rss >> 20} MiB (one process)")
    if run.tree_pss >= runner.RSS_TARGET:
        found.append(f"peak PSS {run.tree_pss >> 20} MiB (kinspect and its workers together)")
    for stream, scan in (("stdout", run.stdout), ("stderr", run.stderr)):
        if scan.controls:
            at, context = scan.controls[0]
            found.append(f"raw control byte in {stream} at {at}: {context!r}")
        if scan.bound_lines:
            found.append(f"{stream} speaks of a bound without naming an option: "
                         f"{scan.bound_lines[0][:200]!r}")
    named = run.stdout.options | run.stderr.options
    if command in hostile.cut_by and not any(o.startswith(cut) for o in named for cut in hostile.cuts):
        found.append(f"a bound must cut this input, and no output names {' or '.join(hostile.cuts)}")
    if junit is not None and run.exit_code in (0, 1):
        found += _junit_problems(junit)
    if is_json(command):
        found += _json_problems(bytes(run.stdout.head))
    return found


def _json_problems(head: bytes) -> list[str]:
    """The whole lines at the start of --json output must each be one JSON object."""
    import json
    lines = head.split(b"\n")[:-1]
    for number, line in enumerate(lines, 1):
        try:
            if not isinstance(json.loads(line), dict):
                raise ValueError("not an object")
        except ValueError as e:
            return [f"--json line {number} is not a JSON object ({e}): {line[:120]!r}"]
    return []


def _junit_problems(junit: Path) -> list[str]:
    import xml.etree.ElementTree as ElementTree
    if not junit.exists():
        return ["--junit wrote no file"]
    data = junit.read_bytes()
    found = []
    control = re.search(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]", data)
    if control:
        found.append(f"raw control byte in the JUnit file at {control.start()}")
    try:
        ElementTree.fromstring(data)
    except ElementTree.ParseError as e:
        found.append(f"the JUnit file is not XML: {e}")
    return found
