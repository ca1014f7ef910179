"""One `decode --json -j1` of a schema capture with one step taken out (not a test): where the
time of schema values goes, by difference.

    /usr/bin/time -f "%U %S" python tests/bench/schema_split.py MODE CAPTURE > /dev/null

MODE full: decode as it is. noread: the Avro and Protobuf readers return one small dict made
once (no fastavro, no protobuf parse, a tiny value to render). noapply: the stage unpacks every
batch's records but looks nothing up (records.apply_record does nothing). With `decode --json -j1
--raw-values` beside them: full - noread is reading the values and rendering their fields;
noread - noapply the framing, id lookup and record plumbing; noapply - raw rendering records as
Python dicts instead of the packed records' C path. decode ends with os._exit, so time it from
outside (its CPU is the process's own).
"""

from __future__ import annotations

import sys


def main() -> None:
    mode, capture = sys.argv[1], sys.argv[2]
    if mode == "noread":
        from kinspect.schemas import avro, protobuf
        avro.AvroReader.read = lambda self, payload: {"x": 1}
        protobuf.ProtoReader.read = lambda self, payload, indexes: ("m", {"x": 1})
    elif mode == "noapply":
        from kinspect.schemas import stage
        stage.apply_record = lambda record, schemas, show=False: True
    elif mode != "full":
        sys.exit(f"unknown mode {mode!r}: full, noread or noapply")
    sys.argv = ["kinspect", "decode", "--json", "-j", "1", capture]
    from kinspect.cli import main as kinspect
    kinspect()


if __name__ == "__main__":
    main()
