"""kinspect spark --keylog (issue 14 with issue 15's TLS): a fixture's connections replayed
through Python's ssl (TLS 1.3) and captured with tcpdump (test_tls_capture.py's recorder); the
key log is read on the driver and its secrets go to the tasks: the rows equal `kinspect decode
--json --keylog`'s, and without the key log there is nothing to decode.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pyarrow.dataset as ds
import pytest

from tests.integration.test_spark_cluster_lab import SAME
from tests.integration.test_tls_capture import FIXTURE, fixture_streams, record_replay
from tests.lab.certs import CertificateAuthority
from tests.lab.pytest_fixtures import require_lab_host
from tests.lab.spark import REPO

pytestmark = pytest.mark.lab


def _kinspect(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kinspect", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def test_keylog_decrypts_in_the_tasks(tmp_path):
    require_lab_host()
    ca = CertificateAuthority(tmp_path / "certs")
    capture, keylog, _ = record_replay(tmp_path, ca, fixture_streams(FIXTURE), "1.3", "TLS_AES_128_GCM_SHA256")
    decoded = [json.loads(line) for line in _kinspect("decode", "--json", "--keylog", keylog, capture).stdout.splitlines()]
    expected = Counter(json.dumps([r[k] for k in SAME.values()]) for r in decoded if r["type"] == "exchange")
    assert sum(expected.values()) > 50
    plain = _kinspect("decode", "--json", capture).stdout
    assert '"type":"exchange"' not in plain.replace(" ", "")  # the capture holds only TLS
    out = tmp_path / "tables"
    done = _kinspect("spark", capture, "--out", out, "--master", "local[2]", "--keylog", keylog)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = ds.dataset(out / "exchanges", format="parquet", partitioning="hive").to_table().to_pylist()
    assert Counter(json.dumps([r[c] for c in SAME]) for r in rows) == expected
