import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
THIRDPARTY = REPO / "tests" / "data" / "thirdparty"  # public third-party data: SOURCES.md there
REALDATA = THIRDPARTY
SPECS = THIRDPARTY / "kafka-message-specs"
PCAPS = REPO / "pcaps"
SAMPLES = REPO / "samples"


@pytest.fixture(scope="session")
def realdata() -> Path:
    if not REALDATA.is_dir():
        pytest.fail(f"{REALDATA} is missing: it is committed (tests/data/thirdparty)")
    return REALDATA


@pytest.fixture(scope="session")
def tshark() -> str:
    path = shutil.which("tshark")
    if path is None:
        pytest.fail("tshark is not installed: run the README's test command, which installs it")
    return path
