import json
import subprocess
import sys

import pytest

from kinspect.wire import apis
from kinspect.wire._schemas import SCHEMAS
from tests.conftest import REPO, SPECS

LINES = ("kafka-3.9.0", "kafka-4.2-snapshot")

# Versions kio (generated from a later Kafka trunk) has but our 2025-10 spec snapshot lacks.
NEWER_THAN_SNAPSHOT = {(27, 2), (35, 5), (63, 2), (78, 2), (79, 2), (85, 1), (87, 1), (90, 1)}


def parse_range(spec: str) -> range:
    if spec == "none":
        return range(0)
    if spec.endswith("+"):
        return range(int(spec[:-1]), 1 << 15)
    low, _, high = spec.partition("-")
    return range(int(low), int(high or low) + 1)


def spec_messages(line: str, kind: str) -> dict[int, dict]:
    found = {}
    for path in sorted((SPECS / line / "clients").glob(f"*{kind.title()}.json")):
        text = "\n".join(l for l in path.read_text().splitlines() if not l.lstrip().startswith("//"))
        spec = json.loads(text)
        if "apiKey" in spec:
            found[spec["apiKey"]] = spec
    return found


@pytest.fixture(scope="module")
def requests_by_line():
    if not SPECS.is_dir():
        pytest.fail(f"{SPECS} is missing: it is committed (tests/data/thirdparty)")
    return {line: spec_messages(line, "request") for line in LINES}


def test_every_spec_version_is_known_with_the_flexibility_of_the_winning_definition(requests_by_line):
    old, new = requests_by_line[LINES[0]], requests_by_line[LINES[1]]
    checked = 0
    for key in old.keys() | new.keys():
        new_versions = parse_range(new[key]["validVersions"]) if key in new else range(0)
        for line, specs in requests_by_line.items():
            if key not in specs:
                continue
            spec = specs[key]
            flexible = parse_range(spec.get("flexibleVersions", "none"))
            for version in parse_range(spec["validVersions"]):
                assert apis.is_known(key, version), (line, key, version)
                if line == LINES[0] and version in new_versions:
                    continue  # 4.2 wins for this version
                header = 2 if version in flexible else 1
                if key == 7 and version == 0:
                    header = 0
                assert apis.request_header_version(key, version) == header, (line, key, version)
                response_header = 0 if key == 18 else (1 if version in flexible else 0)
                assert apis.response_header_version(key, version) == response_header
                checked += 1
    assert checked > 300


def test_versions_outside_the_specs_are_unknown():
    assert not apis.is_known(0, 14)
    assert not apis.is_known(93, 0)
    assert not apis.is_known(1, -1)
    assert apis.is_known(1, 0) and apis.is_known(1, 18)   # Fetch v0 from 3.9, v18 from 4.2
    assert apis.is_known(78, 0) and apis.is_known(78, 1)  # ShareFetch early access v0 (3.9), v1 (4.2)


def test_names_cover_keys_0_to_92():
    assert set(apis.API_NAMES) == set(range(93))
    assert apis.api_name(0) == "Produce"
    assert apis.api_name(1) == "Fetch"
    assert apis.api_name(18) == "ApiVersions"
    assert apis.api_name(74) == "ListConfigResources"  # 3.9 called it ListClientMetricsResources
    assert apis.api_name(92) == "DeleteShareGroupOffsets"
    assert apis.api_name(93) == "Unknown(93)"
    assert apis.api_name(-1) == "Unknown(-1)"


def test_header_version_special_cases():
    assert apis.request_header_version(7, 0) == 0   # ControlledShutdown v0: no client id
    assert apis.request_header_version(7, 1) == 1
    assert apis.request_header_version(7, 3) == 2
    assert apis.response_header_version(18, 3) == 0  # ApiVersions responses: always v0
    assert apis.request_header_version(18, 3) == 2
    assert apis.request_header_version(0, 8) == 1
    assert apis.request_header_version(0, 9) == 2
    assert apis.response_header_version(0, 9) == 1
    # beyond the known versions: flexible APIs stay flexible, unknown keys are assumed flexible
    assert apis.request_header_version(0, 99) == 2
    assert apis.request_header_version(47, 99) == 1  # OffsetDelete never became flexible
    assert apis.request_header_version(200, 0) == 2


def test_flexible_versions_and_ranges_match_kio():
    from kio.index import load_request_schema, load_response_schema
    from kio.schema.index import api_key_map, schema_name_map

    compared = 0
    for key, name in api_key_map.items():
        for version in schema_name_map[name]:
            if (key, version) in NEWER_THAN_SNAPSHOT:
                assert not apis.is_known(key, version)
                continue
            assert apis.is_known(key, version), (key, version)
            flexible = load_request_schema(key, version).__flexible__
            assert apis.request_header_version(key, version) == (2 if flexible else 1), (key, version)
            if key != 18:
                flexible = load_response_schema(key, version).__flexible__
                assert apis.response_header_version(key, version) == (1 if flexible else 0)
            compared += 1
    assert compared > 250


def test_every_4x_version_in_the_specs_is_in_kio():
    from kio.schema.index import api_key_map, schema_name_map

    kio_versions = {(key, v) for key, name in api_key_map.items() for v in schema_name_map[name]}
    ours = {(key, v) for key, (_, requests, _) in SCHEMAS.items()
            for first, last, *_, source in requests if source == "4.2"
            for v in range(first, last + 1)}
    assert ours <= kio_versions
    assert kio_versions - ours == NEWER_THAN_SNAPSHOT


def test_error_names():
    assert apis.error_name(0) == "NONE"
    assert apis.error_name(-1) == "UNKNOWN_SERVER_ERROR"
    assert apis.error_name(6) == "NOT_LEADER_OR_FOLLOWER"
    assert apis.error_name(35) == "UNSUPPORTED_VERSION"
    assert apis.error_name(9999) == "UNKNOWN(9999)"


def test_error_names_are_kios_and_the_table_is_current():
    from kio.schema.errors import ErrorCode

    assert apis.ERROR_NAMES == {member.value: member.name.upper() for member in ErrorCode}
    script = (f"import sys; sys.path.insert(0, {str(REPO / 'tools')!r}); import gen_errors; "
              f"sys.stdout.write(gen_errors.source())")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True).stdout
    assert out == (REPO / "kinspect" / "wire" / "_errors.py").read_bytes()


def test_naming_an_error_does_not_import_kio():
    script = "import sys; from kinspect.wire import apis; apis.error_name(6); print('kio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_generated_table_is_current_and_deterministic(tmp_path):
    """Rerunning the generator over the specs reproduces the committed table byte for byte."""
    committed = (REPO / "kinspect" / "wire" / "_schemas.py").read_bytes()
    script = (f"import sys; sys.path.insert(0, {str(REPO / 'tools')!r}); import gen_schemas; "
              f"sys.stdout.write(gen_schemas.render(gen_schemas.Path({str(SPECS)!r})))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True).stdout
    assert out == committed


def test_generated_table_keeps_no_about_texts():
    text = (REPO / "kinspect" / "wire" / "_schemas.py").read_text()
    assert "'about'" not in text and "Apache License 2.0" in text
