"""Run the harnesses for a while and count what they find: the long campaign, and the figures.

    python tests/fuzz/campaign.py --seconds 300 --jobs 1 [--work DIR] [--out FILE] [fuzz_pcap ...]

Each harness runs as its own process with libFuzzer's limits (harness.py), from the seeds of
seeds.py plus the corpus it grew in earlier runs under --work (kept: a later campaign goes on
from there). libFuzzer stops at the first crash, hang or memory blow-up; the campaign saves that
input under <work>/<harness>/artifacts/, counts it, and starts the harness again with the time
left. The figures (executions, seconds, crashes, hangs, ooms, corpus size, peak RSS) go to
--out as JSON. test_fuzz_ci.py runs each harness once, briefly, with the same code.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# harness → the seed corpus it starts from (seeds.CORPORA)
HARNESSES = {
    "fuzz_pcap": "pcap", "fuzz_pcapng": "pcapng", "fuzz_source": "source", "fuzz_link": "link",
    "fuzz_tcp": "tcp", "fuzz_frames": "frames", "fuzz_headers": "headers",
    "fuzz_messages": "messages", "fuzz_session": "session", "fuzz_pipeline": "captures",
    "fuzz_records": "records", "fuzz_legacy": "legacy", "fuzz_codecs": "codecs",
    "fuzz_segment": "segment", "fuzz_index": "index", "fuzz_snapshot": "snapshot",
    "fuzz_txnindex": "txnindex", "fuzz_checkpoints": "checkpoints",
    "fuzz_coordinator": "coordinator", "fuzz_replay": "replay", "fuzz_tls": "tls",
    "fuzz_keylog": "keylog", "fuzz_tls_handshake": "tls_handshake",
    "fuzz_proxy_frames": "session", "fuzz_schemas": "schemas",
}
CRASH = ("=== Uncaught Python exception", "ERROR: libFuzzer: deadly signal",
         "ERROR: libFuzzer: fuzz target exited")
HANG = ("ERROR: libFuzzer: timeout",)
OOM = ("ERROR: libFuzzer: out-of-memory", "==kinspect-fuzz== out of memory")
GRACE = 120  # seconds a run may take past its -max_total_time (start-up, the last input)


@dataclass
class Run:
    """What one process of a harness did."""
    executions: int = 0
    seconds: float = 0.0
    corpus: int = 0
    peak_rss_mb: int = 0
    slowest_input_s: int = 0       # libFuzzer's slowest_unit_time_sec
    outcome: str = "ok"            # ok, crash, hang, oom, or error (ended otherwise)
    artifact: str | None = None    # the input that failed, as libFuzzer wrote it
    log: str = ""                  # the end of the output, for a report


@dataclass
class Figures:
    """One harness over a campaign."""
    executions: int = 0
    seconds: float = 0.0
    crashes: int = 0
    hangs: int = 0
    ooms: int = 0
    errors: int = 0
    corpus: int = 0
    peak_rss_mb: int = 0
    slowest_input_s: int = 0
    findings: list = field(default_factory=list)  # (outcome, artifact path)


def build_seeds(directory: Path, names=None) -> None:
    """Every corpus (or those of ``names``) into directory/<corpus>/, by seeds.py."""
    corpora = sorted({HARNESSES[n] for n in names or HARNESSES})
    subprocess.run([sys.executable, str(HERE / "seeds.py"), str(directory), *corpora],
                   check=True, stdout=subprocess.DEVNULL)


def run(harness: str, seconds: int, corpus: Path, seeds: Path, artifacts: Path,
        extra: tuple[str, ...] = (), script: Path | None = None) -> Run:
    """One process of ``harness`` (or of another ``script``) for at most ``seconds`` of
    fuzzing, growing ``corpus``."""
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    script = script or HERE / f"{harness}.py"
    command = [sys.executable, str(script), f"-max_total_time={seconds}",
               "-print_final_stats=1", f"-artifact_prefix={artifacts}/", *extra,
               str(corpus), str(seeds)]
    log_path = artifacts / "last.log"
    started = time.monotonic()
    with open(log_path, "wb") as log:
        try:
            code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                  timeout=seconds + GRACE).returncode
        except subprocess.TimeoutExpired:
            code = None
    output = log_path.read_text(errors="replace")
    found = Run(seconds=round(time.monotonic() - started, 1), log=output[-6000:])
    found.executions = _last_int(r"stat::number_of_executed_units:\s*(\d+)", output) or \
        _last_int(r"^#(\d+)\s", output)
    found.peak_rss_mb = _last_int(r"stat::peak_rss_mb:\s*(\d+)", output) or \
        max(map(int, re.findall(r"rss: (\d+)Mb", output)), default=0)
    found.corpus = _last_int(r"corp: (\d+)/", output)
    found.slowest_input_s = _last_int(r"stat::slowest_unit_time_sec:\s*(\d+)", output)
    artifact = re.findall(r"Test unit written to (\S+)", output)
    found.artifact = artifact[-1] if artifact else None
    if any(mark in output for mark in OOM):
        found.outcome = "oom"
    elif any(mark in output for mark in HANG):
        found.outcome = "hang"
    elif any(mark in output for mark in CRASH):
        found.outcome = "crash"
    elif code != 0:
        found.outcome = "error"
    return found


def _last_int(pattern: str, text: str) -> int:
    found = re.findall(pattern, text, re.M)
    return int(found[-1]) if found else 0


def describe_failure(harness: str, found: Run) -> str:
    """What a failing run says: the outcome, the input as base64, the end of its output."""
    lines = [f"{harness}: {found.outcome}"]
    if found.artifact and os.path.exists(found.artifact):
        data = Path(found.artifact).read_bytes()
        lines.append(f"input ({len(data)} bytes, {found.artifact}), base64:")
        lines.append(base64.b64encode(data).decode())
        lines.append(f"reproduce: python tests/fuzz/{harness}.py {found.artifact}")
        lines.append(f"minimize:  python tests/fuzz/minimize.py {harness} {found.artifact}")
    lines.append("output (end):")
    lines.append(found.log[-3000:])
    return "\n".join(lines)


def campaign(harness: str, seconds: int, work: Path, seeds: Path) -> Figures:
    """``harness`` for ``seconds`` in all, started again after each finding."""
    figures = Figures()
    left = seconds
    corpus, artifacts = work / harness / "corpus", work / harness / "artifacts"
    while left > 5:
        found = run(harness, left, corpus, seeds / HARNESSES[harness], artifacts)
        figures.executions += found.executions
        figures.seconds = round(figures.seconds + found.seconds, 1)
        figures.peak_rss_mb = max(figures.peak_rss_mb, found.peak_rss_mb)
        figures.slowest_input_s = max(figures.slowest_input_s, found.slowest_input_s)
        left -= max(found.seconds, 5)
        if found.outcome == "ok":
            break
        attribute = {"crash": "crashes", "hang": "hangs", "oom": "ooms", "error": "errors"}
        setattr(figures, attribute[found.outcome], getattr(figures, attribute[found.outcome]) + 1)
        repeated = (found.outcome, found.artifact) in figures.findings
        figures.findings.append((found.outcome, found.artifact))
        print(describe_failure(harness, found), file=sys.stderr)
        if found.outcome == "error" or repeated:  # an input of the corpus fails: fix it first
            break
    figures.corpus = len(list(corpus.iterdir())) if corpus.is_dir() else 0
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("harnesses", nargs="*", help="fuzz_<parser> names (default: all)")
    parser.add_argument("--seconds", type=int, default=300, help="per harness (default 300)")
    parser.add_argument("--jobs", type=int, default=1, help="harnesses run at once (default 1)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kinspect-fuzz"),
                        help="seeds, grown corpora and failing inputs (kept)")
    parser.add_argument("--out", type=Path, help="the figures as JSON")
    options = parser.parse_args()
    names = [n.removesuffix(".py") for n in options.harnesses] or list(HARNESSES)
    seeds = options.work / "seeds"
    build_seeds(seeds, names)

    def one(name: str) -> tuple[str, Figures]:
        figures = campaign(name, options.seconds, options.work, seeds)
        print(f"{name}: {json.dumps(asdict(figures))}", flush=True)
        return name, figures

    with ThreadPoolExecutor(max_workers=options.jobs) as pool:
        results = dict(pool.map(one, names))
    if options.out:
        from harness import RSS_LIMIT_MB, TIMEOUT_S

        options.out.parent.mkdir(parents=True, exist_ok=True)
        figures = {"date": datetime.date.today().isoformat(), "seconds_per_harness": options.seconds,
                   "rss_limit_mb": RSS_LIMIT_MB, "timeout_s": TIMEOUT_S, "harnesses": {
                       name: {k: v for k, v in asdict(f).items() if k != "findings"} | {
                           "findings": [o for o, _ in f.findings]} for name, f in results.items()}}
        options.out.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
