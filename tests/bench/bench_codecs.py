"""Record decompression per codec: kinspect's decoder against candidate libraries (not a test).

    python tests/bench/bench_codecs.py                       # first 10% of the cached capture
    python tests/bench/bench_codecs.py FILE --fraction 1 --repeat 7 --code worktree

Every compressed batch payload that `kinspect decode` meets in the capture is collected (the
public ``decompress`` spied while kinspect.decode.pipeline decodes the file in this process), then each
decoder runs over all of them: CPU seconds, best of --repeat passes, decoders interleaved in a
rotating order. Before timing, every decoder's output is compared with the reference library's
(the one kinspect used before any of this): a decoder that differs or fails is reported, never
counted as a win. Writes tests/bench/results/codecs-<date>.json and prints a table.

The reference and candidates are called the plainest bounded way their API allows; "upper
limit" rows are unbounded one-shot calls, the most a library could give before the bound costs
anything. `kinspect` is ``codecs.decompress`` itself, notes and all.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.metadata
import json
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.measure import machine_facts, snapshot_kinspect  # noqa: E402
from tests.bench.prefixes import fraction_prefix  # noqa: E402
from tools.record_bench_capture import capture_path  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
MAX_OUTPUT = 64 * 1024 * 1024  # kinspect's default bound
CODECS = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
LIBRARIES = ("isal", "zlib-ng", "cramjam", "python-snappy", "lz4", "zstandard")


@dataclass(frozen=True)
class Decoder:
    name: str
    how: str
    decode: Callable[[bytes], bytes]
    bounded: bool = True


def collect(path: Path) -> tuple[list[tuple[int, bytes, int]], float]:
    """(codec, payload, magic) of every decompress call while decoding path; the decode's CPU s."""
    from kinspect.decode.pipeline import DecodeRun
    from kinspect.records import codecs
    real = codecs.decompress
    seen: list[tuple[int, bytes, int]] = []

    def spy(codec, payload, max_output=codecs.DEFAULT_MAX_OUTPUT, magic=2):
        seen.append((codec, bytes(payload), magic))
        return real(codec, payload, max_output, magic)

    spied = [m for m in list(sys.modules.values())
             if getattr(m, "__name__", "").startswith("kinspect") and getattr(m, "decompress", None) is real]
    for module in spied:
        module.decompress = spy
    try:
        started = time.process_time()
        for _ in DecodeRun(path).records():
            pass
        cpu = time.process_time() - started
    finally:
        for module in spied:
            module.decompress = real
    if not seen:
        raise SystemExit(f"{path}: no compressed batch reached kinspect.records.codecs.decompress "
                         f"(spied in {[m.__name__ for m in spied]})")
    return seen, cpu


def decoders(codec: int) -> list[Decoder]:
    """The reference library first, then kinspect, then whichever candidates are installed."""
    from kinspect.records import codecs
    kinspect = Decoder("kinspect", "kinspect.records.codecs.decompress (as checked out)",
                       lambda p: codecs.decompress(codec, p, MAX_OUTPUT)[0])
    found = [d for d in _CANDIDATES[codec]() if d is not None]
    return [found[0], kinspect, *found[1:]]


def _optional(module: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def _one_gzip_member(module) -> Callable[[bytes], bytes]:
    def inflate(payload: bytes) -> bytes:
        inflater = module.decompressobj(31)
        out = inflater.decompress(payload, MAX_OUTPUT + 1)
        if not inflater.eof or inflater.unused_data or len(out) > MAX_OUTPUT:
            raise ValueError("not exactly one gzip member within the bound")
        return out
    return inflate


def _gzip() -> list[Decoder | None]:
    isal = _optional("isal.isal_zlib")
    zlib_ng = _optional("zlib_ng.zlib_ng")
    how = "decompressobj(31).decompress(payload, bound + 1), one member"
    return [Decoder("zlib", f"stdlib zlib {zlib.ZLIB_RUNTIME_VERSION}: {how}", _one_gzip_member(zlib)),
            isal and Decoder("isal", f"isal_zlib: {how}", _one_gzip_member(isal)),
            zlib_ng and Decoder("zlib-ng", f"zlib_ng: {how}", _one_gzip_member(zlib_ng))]


def _snappy() -> list[Decoder | None]:
    import snappy
    cramjam = _optional("cramjam")
    return [Decoder("python-snappy", "snappy.uncompress (raw blocks; bound from the preamble)",
                    snappy.uncompress),
            cramjam and Decoder("cramjam", "bytes(cramjam.snappy.decompress_raw(payload))",
                                lambda p: bytes(cramjam.snappy.decompress_raw(p)))]


def _lz4() -> list[Decoder | None]:
    import lz4.frame
    cramjam = _optional("cramjam")

    def bounded(payload: bytes) -> bytes:
        return lz4.frame.LZ4FrameDecompressor().decompress(payload, max_length=MAX_OUTPUT + 1)
    return [Decoder("lz4.frame", "LZ4FrameDecompressor().decompress(payload, max_length=bound + 1)",
                    bounded),
            Decoder("lz4.frame one-shot", "lz4.frame.decompress(payload) (upper limit)",
                    lz4.frame.decompress, bounded=False),
            cramjam and Decoder("cramjam", "bytes(cramjam.lz4.decompress(payload)) (upper limit)",
                                lambda p: bytes(cramjam.lz4.decompress(p)), bounded=False)]


def _zstd() -> list[Decoder | None]:
    import zstandard
    cramjam = _optional("cramjam")
    return [Decoder("zstandard", "ZstdDecompressor().decompress(payload, max_output_size=bound)",
                    lambda p: zstandard.ZstdDecompressor().decompress(p, max_output_size=MAX_OUTPUT)),
            cramjam and Decoder("cramjam", "bytes(cramjam.zstd.decompress(payload)) (upper limit)",
                                lambda p: bytes(cramjam.zstd.decompress(p)), bounded=False)]


_CANDIDATES = {1: _gzip, 2: _snappy, 3: _lz4, 4: _zstd}


def agreement(decoder: Decoder, payloads: list[bytes], expected: list[bytes | None]) -> dict:
    identical = differs = failed = 0
    for payload, want in zip(payloads, expected):
        try:
            got = decoder.decode(payload)
        except Exception:
            failed += 1
            continue
        if got == want:
            identical += 1
        else:
            differs += 1
    return {"identical": identical, "differs": differs, "failed": failed}


def best_cpu(rows: list[Decoder], payloads: list[bytes], repeat: int) -> list[float]:
    best = [float("inf")] * len(rows)
    for round_ in range(repeat):
        for k in range(len(rows)):
            i = (k + round_) % len(rows)
            decode = rows[i].decode
            gc.collect()
            started = time.process_time()
            for payload in payloads:
                try:
                    decode(payload)
                except Exception:
                    pass
            best[i] = min(best[i], time.process_time() - started)
    return best


def measure_codec(codec: int, payloads: list[bytes], repeat: int) -> dict:
    rows = decoders(codec)
    expected = []
    for payload in payloads:
        try:
            expected.append(rows[0].decode(payload))
        except Exception:
            expected.append(None)
    cpu = best_cpu(rows, payloads, repeat)
    reference_s, kinspect_s = cpu[0], cpu[1]
    out_bytes = sum(len(e) for e in expected if e is not None)
    results = []
    for row, seconds in zip(rows, cpu):
        results.append({
            "name": row.name, "how": row.how, "bounded": row.bounded, "cpu_s": round(seconds, 4),
            "us_per_batch": round(seconds / len(payloads) * 1e6, 1),
            "out_mb_per_s": round(out_bytes / seconds / 1e6, 1) if seconds else None,
            "x_reference": round(reference_s / seconds, 2) if seconds else None,
            "x_kinspect": round(kinspect_s / seconds, 2) if seconds else None,
            **agreement(row, payloads, expected)})
    return {"codec": CODECS[codec], "batches": len(payloads),
            "compressed_bytes": sum(map(len, payloads)), "decompressed_bytes": out_bytes,
            "reference_failed": sum(e is None for e in expected), "decoders": results}


def fastest_sound(entry: dict) -> dict:
    """The fastest bounded decoder that agreed with the reference on every payload."""
    sound = [d for d in entry["decoders"]
             if d["bounded"] and d["differs"] == 0 and d["failed"] == entry["reference_failed"]]
    return min(sound, key=lambda d: d["cpu_s"])


def library_versions() -> dict:
    versions = {"zlib": zlib.ZLIB_RUNTIME_VERSION}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("capture", nargs="?", type=Path, default=capture_path())
    parser.add_argument("--fraction", type=float, default=0.1, help="use this prefix of the capture")
    parser.add_argument("--repeat", type=int, default=5, help="timed passes per decoder; the best counts")
    parser.add_argument("--code", default="HEAD", help="git ref of the kinspect to measure, or 'worktree'")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    path, packets = fraction_prefix(args.capture, args.fraction)
    started = time.time()
    facts = machine_facts()
    with tempfile.TemporaryDirectory(prefix="kinspect-codecs-") as scratch:
        facts["kinspect"] = snapshot_kinspect(Path(scratch), args.code)
        sys.path.insert(0, scratch)  # kinspect imports from the snapshot from here on
        seen, decode_cpu = collect(path)
        by_codec: dict[int, list[bytes]] = {}
        for codec, payload, _magic in seen:
            by_codec.setdefault(codec, []).append(payload)
        entries = [measure_codec(codec, by_codec[codec], args.repeat)
                   for codec in sorted(by_codec) if codec in CODECS]
    facts["libraries"] = library_versions()
    kinspect_s = sum(d["cpu_s"] for e in entries for d in e["decoders"] if d["name"] == "kinspect")
    reference_s = sum(e["decoders"][0]["cpu_s"] for e in entries)
    fastest_s = sum(fastest_sound(e)["cpu_s"] for e in entries)
    totals = {"reference_cpu_s": round(reference_s, 4), "kinspect_cpu_s": round(kinspect_s, 4),
              "fastest_sound_cpu_s": round(fastest_s, 4),
              "fastest_sound": {e["codec"]: fastest_sound(e)["name"] for e in entries},
              "decode_cpu_s": round(decode_cpu, 3),
              "kinspect_share_of_decode": round(kinspect_s / decode_cpu, 3) if decode_cpu else None}
    result = {"benchmark": "record decompression", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
              "machine": facts, "capture": {"file": path.name, "packets": packets, "bytes": path.stat().st_size},
              "max_output": MAX_OUTPUT, "repeat": args.repeat, "codecs": entries, "totals": totals}
    out = args.out or RESULTS / f"codecs-{time.strftime('%Y%m%d-%H%M', time.gmtime(started))}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print_table(result, path)
    print(f"\nresults: {out.relative_to(REPO) if out.is_relative_to(REPO) else out}")
    return 0


def print_table(result: dict, path: Path) -> None:
    capture, totals = result["capture"], result["totals"]
    print(f"{path.name}: {capture['packets']:,} packets; kinspect {result['machine']['kinspect']['commit'][:7]} "
          f"({result['machine']['kinspect']['ref']}); best CPU of {result['repeat']} passes")
    print(f"\n{'codec':7} {'batches':>7} {'in MB':>7} {'out MB':>7}  {'decoder':19} {'cpu s':>7} "
          f"{'µs/batch':>9} {'out MB/s':>9} {'×ref':>6} {'×kinspect':>9}  agrees")
    for entry in result["codecs"]:
        head = (f"{entry['codec']:7} {entry['batches']:7,} {entry['compressed_bytes'] / 1e6:7.1f} "
                f"{entry['decompressed_bytes'] / 1e6:7.1f}")
        for d in entry["decoders"]:
            agrees = "yes" if d["differs"] == 0 and d["failed"] == entry["reference_failed"] else \
                f"NO ({d['differs']} differ, {d['failed']} fail)"
            bound = "" if d["bounded"] else " (unbounded)"
            print(f"{head:31}  {d['name']:19} {d['cpu_s']:7.3f} {d['us_per_batch']:9.1f} "
                  f"{d['out_mb_per_s']:9.1f} {d['x_reference']:6.2f} {d['x_kinspect']:9.2f}  {agrees}{bound}")
            head = ""
    print(f"\ndecompression CPU: reference libraries {totals['reference_cpu_s']:.3f} s, kinspect "
          f"{totals['kinspect_cpu_s']:.3f} s, fastest sound per codec {totals['fastest_sound_cpu_s']:.3f} s "
          f"({', '.join(f'{k}: {v}' for k, v in totals['fastest_sound'].items())})")
    print(f"the whole in-process decode of the capture: {totals['decode_cpu_s']:.2f} s CPU; kinspect's "
          f"decompression is {totals['kinspect_share_of_decode']:.1%} of it")


if __name__ == "__main__":
    sys.exit(main())
