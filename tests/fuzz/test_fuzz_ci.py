"""A bounded fuzz run of every harness, as CI runs it: a few seconds each, two at a time, about
two minutes in all on two CPUs. A harness that reports a crash, a hang (libFuzzer's -timeout) or a memory
blow-up (-rss_limit_mb, RLIMIT_AS) fails its test, which prints the failing input as base64
and the commands that reproduce and minimize it (then: a test in test_regressions.py).

Generated decoders are not instrumented here (-instrument_generated=0): instrumenting each costs
more time than such a short run has. The long campaign (campaign.py, README.md) instruments them.
"""

from __future__ import annotations

import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.fuzz import campaign

# seconds of fuzzing per harness, on top of ~2-4 s to start and run the seeds
BUDGET = {
    "fuzz_pipeline": 7, "fuzz_session": 7, "fuzz_messages": 7, "fuzz_segment": 6,
    "fuzz_records": 5, "fuzz_legacy": 5, "fuzz_tcp": 4, "fuzz_frames": 4, "fuzz_coordinator": 4,
    "fuzz_replay": 4, "fuzz_index": 4, "fuzz_pcap": 3, "fuzz_pcapng": 3, "fuzz_source": 3,
    "fuzz_link": 3, "fuzz_headers": 3, "fuzz_codecs": 3, "fuzz_snapshot": 2, "fuzz_txnindex": 3,
    "fuzz_checkpoints": 3, "fuzz_tls": 4, "fuzz_keylog": 3, "fuzz_tls_handshake": 4,
    "fuzz_proxy_frames": 4, "fuzz_schemas": 4,
}


SEED = 20261124  # the same mutations every run: CI repeats what passed here


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    directory = tmp_path_factory.mktemp("fuzz-seeds")
    campaign.build_seeds(directory)
    return directory


def test_every_harness_has_a_budget():
    assert set(BUDGET) == set(campaign.HARNESSES)


@pytest.fixture(scope="module")
def fuzzed(request, seeds, tmp_path_factory):
    """Each harness's run, the next one started while this one is judged: two fuzzing processes
    at a time, one per CPU (a run's budget is its own wall time; only crashes are judged)."""
    order = [item.callspec.params["harness"] for item in request.session.items
             if item.originalname == "test_harness_finds_nothing"]
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="fuzz")
    started = {}

    def start(harness):
        if harness not in started:
            where = tmp_path_factory.mktemp(harness)
            started[harness] = pool.submit(campaign.run, harness, BUDGET[harness], where / "corpus",
                                           seeds / campaign.HARNESSES[harness], where / "artifacts",
                                           ("-instrument_generated=0", f"-seed={SEED}"))

    def result(harness):
        at = order.index(harness) if harness in order else len(order)
        for name in [harness, *order[at + 1:at + 2]]:
            start(name)
        return started.pop(harness).result()

    yield result
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("harness", sorted(BUDGET))
def test_harness_finds_nothing(harness, fuzzed):
    found = fuzzed(harness)
    assert found.outcome == "ok", campaign.describe_failure(harness, found)
    assert found.executions > 0, found.log


BROKEN = {  # a target that fails each way, and how the run must be reported
    "crash": "raise ValueError('boom')",
    "hang": "time.sleep(60)",
    "oom": "held.append(b'x' * (700 << 20))",  # past -rss_limit_mb=512
}


@pytest.mark.parametrize("outcome", sorted(BROKEN))
def test_a_failing_target_is_reported_with_its_input(outcome, tmp_path):
    script = tmp_path / f"fuzz_broken_{outcome}.py"
    script.write_text(textwrap.dedent(f"""\
        import sys, time
        sys.path.insert(0, {str(campaign.HERE)!r})
        import harness
        held = []

        def target(data):
            {BROKEN[outcome]}

        harness.main(target, "snapshot")
        """))
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "one").write_bytes(b"seed")
    found = campaign.run(script.stem, 20, tmp_path / "corpus", seeds, tmp_path / "artifacts",
                         ("-timeout=2",), script=script)
    assert found.outcome == outcome, found.log
    report = campaign.describe_failure(script.stem, found)
    assert found.artifact and "base64:" in report and "reproduce:" in report
