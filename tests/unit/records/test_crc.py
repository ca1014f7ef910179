"""records/crc.py: crc32c's extension loaded without its package's start-up, same results."""

import os
import subprocess
import sys

import crc32c as package

from kinspect.records import crc


def test_the_extension_is_loaded_directly_and_agrees_with_the_package():
    assert crc.crc32c is not package.crc32c  # the same C function from its own module object
    for size in (0, 1, 7, 8, 9, 63, 64, 65, 4096, 100_003):
        data = os.urandom(size)
        assert crc.crc32c(data) == package.crc32c(data)
        assert crc.crc32c(memoryview(data)) == package.crc32c(data)
    assert crc.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value


def test_start_up_does_not_import_the_package_or_importlib_metadata():
    code = ("import sys; from kinspect.records.crc import crc32c; "
            "print('importlib.metadata' in sys.modules, 'crc32c' in sys.modules, crc32c(b'123456789'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", str(0xE3069283)]


def test_falls_back_to_the_package_when_the_extension_is_not_where_expected(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    function = crc._load()
    assert function is package.crc32c
    assert function(b"123456789") == 0xE3069283
