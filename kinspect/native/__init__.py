"""The optional C accelerators (setup.py builds them), or None where they are not built.

Each has a pure-Python twin that gives the same results; KINSPECT_PURE_PYTHON=1 makes kinspect
use the twins even where the accelerators are built (for tests and for bisecting a doubt).
"""

from __future__ import annotations

import importlib
import os


def _load(name: str):
    if os.environ.get("KINSPECT_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


v2records = _load("kinspect.native._v2records")
bytes_json = _load("kinspect.native._bytes_json")
packets = _load("kinspect.native._packets")
ring = _load("kinspect.native._ring")
bodies = _load("kinspect.native._bodies")
tls = _load("kinspect.native._tls")
relay = _load("kinspect.native._relay")
avro = _load("kinspect.native._avro")            # Avro values as JSON text (schemas/avro_json.py)
protobuf = _load("kinspect.native._protobuf")    # Protobuf values as JSON text (schemas/protobuf_json.py)


def status() -> dict[str, bool]:
    """Which accelerators this process uses."""
    return {"v2records": v2records is not None, "bytes_json": bytes_json is not None,
            "packets": packets is not None, "ring": ring is not None, "bodies": bodies is not None,
            "tls": tls is not None, "relay": relay is not None, "avro": avro is not None,
            "protobuf": protobuf is not None}
