import dis
import shutil
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
THIRDPARTY = REPO / "tests" / "data" / "thirdparty"  # public third-party data: SOURCES.md there
REALDATA = THIRDPARTY
SPECS = THIRDPARTY / "kafka-message-specs"
PCAPS = REPO / "pcaps"
SAMPLES = REPO / "samples"

# Two broker log dirs from public repositories that grant no licence (tests/data/thirdparty/
# SOURCES.md says where they are): not committed. Put copies here to run the tests that read them;
# without them those tests are skipped, with this reason.
UNLICENSED = REPO / "tests" / "data" / "unlicensed"
KAFKAFUN = UNLICENSED / "kafkafun"
SOC_STREAMING = UNLICENSED / "soc-streaming-detection"
UNLICENSED_MISSING = (f"needs {UNLICENSED.relative_to(REPO)}/, broker log dirs without a licence, "
                      f"not committed (tests/data/thirdparty/SOURCES.md)")


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


def pytest_collection_modifyitems(items):
    """Without tests/data/unlicensed, skip every test that reads it: one whose function, fixtures
    or parameters name a path inside it, directly or through a function of its own module."""
    if KAFKAFUN.is_dir() and SOC_STREAMING.is_dir():
        return
    for item in items:
        if _reads_unlicensed(item):
            item.add_marker(pytest.mark.skip(reason=UNLICENSED_MISSING))


def _reads_unlicensed(item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    if any(_unlicensed(value) for value in params.values()):
        return True
    functions = [getattr(item, "function", None)]
    for name in getattr(item, "fixturenames", ()):
        functions += [d.func for d in item._fixtureinfo.name2fixturedefs.get(name, ())]
    seen: set = set()
    return any(_names_unlicensed(f, seen) for f in functions if isinstance(f, types.FunctionType))


def _names_unlicensed(function: types.FunctionType, seen: set) -> bool:
    if function.__code__ in seen:
        return False
    seen.add(function.__code__)
    scope = function.__globals__
    for code in _code_objects(function.__code__):
        for value in _values_named(code, scope):
            if _unlicensed(value):
                return True
            if (isinstance(value, types.FunctionType) and value.__module__ == function.__module__
                    and _names_unlicensed(value, seen)):
                return True
    return False


def _values_named(code: types.CodeType, scope: dict):
    """What the code's global names, and the names it imports (`from m import NAME`), are bound to."""
    for name in code.co_names:
        yield scope.get(name)
    module = None
    for instruction in dis.get_instructions(code):
        if instruction.opname == "IMPORT_NAME":
            module = sys.modules.get(instruction.argval)
        elif instruction.opname == "IMPORT_FROM" and module is not None:
            yield getattr(module, instruction.argval, None)


def _code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _unlicensed(value) -> bool:
    return isinstance(value, Path) and value.is_relative_to(UNLICENSED)
