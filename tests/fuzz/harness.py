"""What every harness shares: libFuzzer's limits, coverage of kinspect, seeds, and the checks.

A harness is a script: ``python tests/fuzz/fuzz_pcap.py [libFuzzer args] [corpus dirs]``. With
no corpus directory on its command line, it builds its seeds from the real fixtures (seeds.py)
into a temporary directory, and new inputs go to another one; both are removed at the end.

The property every target checks: no exception escapes kinspect (data problems come back as
Problem values), no Problem hides an exception that a catch-all turned into a "decoder error",
and every input finishes within ``-timeout`` seconds and ``-rss_limit_mb`` of memory, with
RLIMIT_AS as a backstop for an allocation too big to ever reach the RSS check.
"""

from __future__ import annotations

import functools
import os
import re
import resource
import shutil
import signal
import sys
import tempfile

import atheris

RSS_LIMIT_MB = 512
TIMEOUT_S = 10
ADDRESS_SPACE = 3 << 30  # bytes: libFuzzer's RSS check acts first on anything that is touched
OOM_MARK = "==kinspect-fuzz== out of memory:"
GENERATED_FLAG = "-instrument_generated="
# Problems that a catch-all made of an exception: a bug, not a data problem.
HIDDEN_EXCEPTIONS = ("decoder_error",)
HIDDEN_PREFIXES = ("record decoder failed", "decoder error")
# The longest input of each corpus (-max_len): files of a few packets or batches, smaller units.
MAX_LEN = {
    "pcap": 16384, "pcapng": 16384, "source": 16384, "captures": 16384, "link": 2048,
    "tcp": 8192, "frames": 8192, "headers": 1024, "messages": 8192, "session": 16384,
    "records": 8192, "legacy": 8192, "codecs": 8192, "segment": 8192, "index": 8192,
    "snapshot": 4096, "txnindex": 4096, "checkpoints": 2048, "coordinator": 2048,
    "replay": 8192, "tls": 16384, "keylog": 16384, "tls_handshake": 16384, "schemas": 8192,
}


def instrumented(*packages: str):
    """Import kinspect's modules inside this block: those under ``packages`` get coverage."""
    return atheris.instrument_imports(include=list(packages))


def instrument_generated() -> None:
    """Body and struct decoders are generated at run time (exec), out of reach of the import
    hook: instrument each as it is compiled."""
    from kinspect.storage import structs
    from kinspect.wire import messages

    def instrumenting(compile_one):
        @functools.lru_cache(maxsize=None)
        def compiled(*key):
            decode = compile_one(*key)
            for value in list(decode.__globals__.values()):
                code = getattr(value, "__code__", None)
                if code is not None and code.co_filename.startswith("<kinspect"):
                    atheris.instrument_func(value)
            return decode
        return compiled

    messages._compiled = instrumenting(messages._compiled)
    structs._decoder = instrumenting(structs._decoder)


class Finding(AssertionError):
    """A property failed: atheris reports it as a crash, with this message."""


def check_problems(problems, where: str = "", once: bool = True) -> None:
    """Problems (Problem objects or their dicts) must be data problems, not hidden exceptions,
    and (``once``) each is reported once."""
    seen = set()
    for p in problems:
        p = p if isinstance(p, dict) else p.to_dict()
        check, what = p.get("check"), p.get("what")
        if check in HIDDEN_EXCEPTIONS or str(what).startswith(HIDDEN_PREFIXES):
            raise Finding(f"{where}an exception was caught and reported as a problem: {what}")
        key = (what, p.get("path"), p.get("offset"), p.get("side"))
        if p.get("offset") is None or "→ records" not in str(p.get("path")):
            continue  # a record set's problems are each reported once; elsewhere a body's
            # warnings name a field, not an element, and may repeat (checked on record sets)
        if once and key in seen:
            raise Finding(f"{where}a problem is reported twice: {p}")
        seen.add(key)


def check_tree(value, where: str = "") -> None:
    """Every "problems" list anywhere in an output record."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "problems" and isinstance(item, list):
                check_problems(item, where)
            elif isinstance(item, (dict, list)):
                check_tree(item, where)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)):
                check_tree(item, where)


UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")  # what render/safe.py escapes
UNSAFE_BUT_LAYOUT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def small_limits():
    """Bounds small enough for a fuzz input to reach them: cut arrays, refused decompression,
    streamed records (kinspect.limits)."""
    from kinspect.limits import Limits

    return Limits(max_items=64, max_batch_bytes=1 << 16, max_ratio=10, max_file_ratio=2,
                  eager_records=16)


def check_text(line: str, layout: bool = False) -> None:
    """No control character from the input reaches a line of text output (render/safe.py
    escapes them as the line is built); ``layout``: the line may hold kinspect's own tabs and
    newlines."""
    if (UNSAFE_BUT_LAYOUT if layout else UNSAFE).search(line):
        raise Finding(f"a control character reaches the text: {line!r}")


DUMP_MODES = ("auto", "text", "hex", "json")  # dump --decode


class DumpViews:
    """What `kinspect dump` makes of its events: the table (checked for control characters),
    kafka-dump-log's lines (never of headers-only events: dump --format kafka always decodes),
    and the JSON Lines with records shown by views.record_view."""

    def __init__(self, records: bool, data: bool, mode: str = "auto", shallow: bool = False):
        from kinspect.render.kafka_format import KafkaFormat
        from kinspect.render.dump_lines import TableFormat

        self.data, self.mode = data, mode
        self.table = TableFormat(data, mode)
        self.kafka = None if shallow else KafkaFormat(deep=records, data=data)

    def show(self, event: dict) -> None:
        from kinspect.records.stream import RecordStream
        from kinspect.render.jsonl import dumpb
        from kinspect.render.dump_views import record_view

        check_tree(event)
        lines = self.table.lines(event)
        records = event.get("records")
        if isinstance(records, RecordStream):
            for chunk in records.chunks():
                lines += self.table.record_lines(event, chunk)
        for line in lines:
            check_text(line.plain, layout=True)
        if self.kafka is not None:
            self.kafka.lines(event)
        if records and event["type"] == "batch":
            event["records"] = [record_view(r, self.data, self.mode) for r in records]
        dumpb(event)

    def finish(self) -> None:
        if self.kafka is not None:
            self.kafka.errors()


def agree(what: str, first, second, names: tuple[str, str] = ("C", "Python")) -> None:
    """Two ways to the same result must agree: by default the C accelerator and its
    pure-Python twin."""
    if first != second:
        raise Finding(f"{what}: {names[0]} and {names[1]} differ:\n"
                      f"  {names[0]}: {first!r:.2000}\n  {names[1]}: {second!r:.2000}")


def _limit_address_space() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    wanted = ADDRESS_SPACE if hard == resource.RLIM_INFINITY else min(ADDRESS_SPACE, hard)
    if soft == resource.RLIM_INFINITY or soft > wanted:
        resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))


def _guarded(target):
    def run(data: bytes) -> None:
        try:
            target(data)
        except MemoryError:
            sys.stderr.write(f"{OOM_MARK} MemoryError under RLIMIT_AS {ADDRESS_SPACE >> 20} MiB\n")
            sys.stderr.flush()
            raise
    return run


def _has_corpus(args: list[str]) -> bool:
    return any(not a.startswith("-") for a in args)


def main(target, corpus: str, generated: bool = False) -> None:
    """Run ``target`` under libFuzzer; ``corpus`` names the seeds of seeds.py to start from;
    ``generated``: the target runs generated decoders, instrumented unless the command line
    says -instrument_generated=0 (instrumenting one costs about 50 ms: a short run's time)."""
    args = [a for a in sys.argv[1:] if not a.startswith(GENERATED_FLAG)]
    if generated and GENERATED_FLAG + "0" not in sys.argv[1:]:
        instrument_generated()
    max_len = MAX_LEN[corpus]
    defaults = {"-rss_limit_mb": RSS_LIMIT_MB, "-timeout": TIMEOUT_S, "-max_len": max_len}
    for flag, value in defaults.items():
        if not any(a.startswith(flag + "=") for a in args):
            args.append(f"{flag}={value}")
    if not _has_corpus(args):
        args += _temporary_corpus(corpus, max_len)
    _limit_address_space()
    atheris.Setup([sys.argv[0], *args], _guarded(target))
    atheris.Fuzz()


def _temporary_corpus(corpus: str, max_len: int) -> list[str]:
    """Seeds in a temporary directory, removed when fuzzing ends. libFuzzer ends the process
    with C's exit(), which runs no Python clean-up: the fuzzing runs in a child process and
    this one waits to remove the directory."""
    import seeds  # after the kinspect imports, which must come first to be instrumented

    work = tempfile.mkdtemp(prefix=f"kinspect-fuzz-{corpus}-")
    new, seeded = os.path.join(work, "new"), os.path.join(work, "seeds")
    os.mkdir(new)
    count = seeds.write_corpus(corpus, seeded, max_len)
    sys.stderr.write(f"INFO: {count} seeds of corpus {corpus!r} from the real fixtures in {seeded}\n")
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        return [new, seeded]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the child gets it too, and stops
    _, status = os.waitpid(child, 0)
    shutil.rmtree(work, ignore_errors=True)
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


def read_capture(parser, data: bytes, chunk: int) -> tuple:
    """Feed a pcap or pcapng ``parser`` the file whole (``chunk`` 0) or ``chunk`` bytes at a
    time: (packets, problems as dicts, packet count), its problems checked."""
    if not chunk:
        parser.feed(data)
        packets = list(parser.packets(final=True))
    else:
        packets = []
        for at in range(0, len(data), chunk):
            parser.feed(data[at:at + chunk])
            packets += parser.packets()
        parser.close()
    check_problems(parser.problems)
    return ([(ts, linktype, bytes(d), n) for ts, linktype, d, n in packets],
            [p.to_dict() for p in parser.problems], parser.count)
