"""Tests of the C accelerators (kinspect/native) against their pure-Python twins.

``needs_c``: the mark of a test whose subject is a C module itself. KINSPECT_PURE_PYTHON=1 leaves
every C module out, so such a test is skipped there, and the twins are what the rest of the unit
suite runs (CI runs it that way too). Without that variable a C module that is missing still
fails its tests: CI builds every accelerator (test_v2records.py asserts it).
"""

import os

import pytest

PURE_PYTHON = bool(os.environ.get("KINSPECT_PURE_PYTHON"))

needs_c = pytest.mark.skipif(PURE_PYTHON, reason=(
    "its subject is a C module of kinspect/native, which KINSPECT_PURE_PYTHON=1 leaves out: the "
    "pure-Python twin it is compared with here is what every other test runs in this mode"))
