"""What kinspect decode's start-up imports: modules only some runs need stay out of it."""

import subprocess
import sys

import pytest

DECODE = "import sys; import kinspect.cli.decode, kinspect.schemas.stage; print(' '.join(sorted(sys.modules)))"


@pytest.fixture(scope="module")
def imported() -> set[str]:
    run = subprocess.run([sys.executable, "-c", DECODE], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return set(run.stdout.split())


@pytest.mark.parametrize("module", ["urllib.request", "http.client", "ssl", "email.parser",  # the registry's HTTP
                                    "lz4", "snappy", "cramjam", "zstandard", "isal",  # codecs: at first payload
                                    "kio", "_hashlib"])  # error names from a table; OpenSSL's hashes
def test_decode_start_up_leaves_out(imported, module):
    assert module not in imported
