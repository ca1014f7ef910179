"""Tests of the C accelerators (kinspect/native) against their pure-Python twins.

``needs_c``: the mark of a test whose subject is a C module itself. KINSPECT_PURE_PYTHON=1 leaves
every C module out, so CI's pure-Python run deselects these (``-m "not needs_c"`` in tests/run.sh):
they run in the main run, and the twins are what the rest of that run's unit tests exercise. Without that variable a C module that is missing still
fails its tests: CI builds every accelerator (test_v2records.py asserts it).
"""

import pytest

needs_c = pytest.mark.needs_c
