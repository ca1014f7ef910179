"""Session fixtures shared by the tests/integration/test_lab_*.py modules (import them there).

fresh_capture(name) records a recipe once per session into a temporary directory;
committed_capture(name) reads pcaps/; decoded(path) runs kinspect once per capture.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.lab import checks
from tests.lab.recipes import BY_NAME, record

REPO = Path(__file__).resolve().parents[2]
PCAPS = REPO / "pcaps"
LAB_TOOLS = ("ip", "tcpdump", "dumpcap", "capinfos", "tshark")


def committed_names() -> list[str]:
    return sorted(p.name.removesuffix(".manifest.json") for p in PCAPS.glob("*.manifest.json"))


def require_lab_host() -> None:
    """The lab needs root (namespaces, capture); CI runs as root, so a miss is a failure."""
    missing = [tool for tool in LAB_TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"the capture lab needs {missing} on PATH")
    if os.geteuid() != 0:
        pytest.fail("the capture lab needs root (network namespaces, packet capture)")


@pytest.fixture(scope="session")
def fresh_capture(tmp_path_factory):
    """name → (capture path, manifest), recorded from live clients on first use."""
    cache: dict[str, tuple[Path, dict]] = {}
    directory = tmp_path_factory.mktemp("lab-captures")

    def get(name: str) -> tuple[Path, dict]:
        if name not in cache:
            require_lab_host()
            manifest_path = record(BY_NAME[name], directory)
            manifest = json.loads(manifest_path.read_text())
            cache[name] = (directory / manifest["file"], manifest)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def committed_capture():
    def get(name: str) -> tuple[Path, dict]:
        manifest = json.loads((PCAPS / f"{name}.manifest.json").read_text())
        return PCAPS / manifest["file"], manifest

    return get


@pytest.fixture(scope="session")
def decoded():
    """capture path → checks.Decoded, decoding each capture once per session (failures too)."""
    cache: dict[Path, checks.Decoded | checks.DecodeFailed] = {}

    def get(capture: Path) -> checks.Decoded:
        if capture not in cache:
            try:
                cache[capture] = checks.decode(capture)
            except checks.DecodeFailed as exc:
                cache[capture] = exc
        if isinstance(cache[capture], checks.DecodeFailed):
            raise cache[capture]
        return cache[capture]

    return get
