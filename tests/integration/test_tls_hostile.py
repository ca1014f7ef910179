"""Issue 30's hostile TLS and key-log inputs (tests/hostile/inputs_tls.py) through the commands
that read them, each run in a subprocess by tests/hostile/runner.py: under the address-space
bound (ulimit -v, 576 MiB) and a hang timeout, a documented exit code, no traceback, peak RSS
under 512 MiB, and output proportionate to the input. Timings are not judged here (the report of
the hostile bench gives them).

Before the fixes: the junk key log and the junk DSB took 3.5 and 3.6 GB (past the bound: a
MemoryError), 64 ClientHellos in one-byte records ran 74 s, and the damaged records gave twice
the capture's size in notices.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile import inputs_tls, runner

FIXTURE = Path(__file__).resolve().parents[2] / "pcaps" / "librdkafka-produce-consume.pcapng"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-tls")
    return {"junk_keylog": inputs_tls.junk_keylog(root), "junk_dsb": inputs_tls.junk_dsb_pcapng_gz(root),
            "one_byte_hellos": inputs_tls.one_byte_hellos_pcap_gz(root),
            "damaged": inputs_tls.damaged_records_pcapng(root)}


def _checked(args, codes) -> runner.Run:
    run = runner.run(args)
    said = f"kinspect {' '.join(map(str, args))}: exit {run.exit_code}, peak RSS {run.peak_rss >> 20} MiB\n" \
           f"{run.crash_head()}"
    assert not run.timed_out and run.exit_code in codes, said
    assert not run.stdout.crash and not run.stderr.crash, said
    assert run.peak_rss < runner.RSS_TARGET, said
    return run


@pytest.mark.parametrize("command", [["decode", "--json"], ["decode"], ["validate"], ["offsets", "--capture"]])
def test_a_key_log_of_junk(made, command):
    run = _checked([*command, str(FIXTURE), "--keylog", str(made["junk_keylog"])], (0, 1))
    assert b"33554308 lines not understood, skipped (first: " in bytes(run.stderr.head)
    assert run.stderr.size < 4096  # said once


@pytest.mark.parametrize("command", [["decode", "--json"], ["decode"], ["validate"], ["offsets", "--capture"]])
def test_junk_in_a_decryption_secrets_block(made, command):
    run = _checked([*command, str(made["junk_dsb"])], (0, 1))
    assert run.stdout.size < 64 * 1024


@pytest.mark.parametrize("command", [["decode", "--json"], ["validate"]])
def test_client_hellos_in_one_byte_records(made, command):
    run = _checked([*command, str(made["one_byte_hellos"])], (0, 1))  # no Kafka in them: decode says so (1)
    assert run.stdout.size < 64 * 1024


@pytest.mark.parametrize("command", [["decode", "--json"], ["decode"], ["validate"]])
def test_damaged_records_are_folded(made, command):
    capture = made["damaged"]
    run = _checked([*command, str(capture)], (0, 1))
    if command == ["decode", "--json"]:  # the exchanges (half of them) and a few notices
        assert run.stdout.size < capture.stat().st_size // 1.5
        assert b'more tls_auth notices on this connection' in bytes(run.stdout.head) + run.stdout.tail
