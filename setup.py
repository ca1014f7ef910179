"""Optional C accelerators; everything else is in pyproject.toml.

Each has a pure-Python twin that give the same results (tests/unit/test_native.py checks), so a
machine without a C compiler still installs kinspect: `optional=True` turns a failed build into
a warning, and kinspect then runs its Python paths (slower).
"""

from setuptools import Extension, setup

FLAGS = ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]

setup(ext_modules=[
    Extension("kinspect.native._v2records", ["kinspect/native/_v2records.c"],
              extra_compile_args=FLAGS, optional=True, depends=["kinspect/native/_json_out.h"]),
    Extension("kinspect.native._packets", ["kinspect/native/_packets.c"],
              extra_compile_args=FLAGS, optional=True),
    Extension("kinspect.native._bytes_json", ["kinspect/native/_bytes_json.c"],
              extra_compile_args=FLAGS, optional=True),
    Extension("kinspect.native._ring", ["kinspect/native/_ring.c"],  # sniff's TPACKET_V3 blocks
              extra_compile_args=FLAGS, optional=True),
    Extension("kinspect.native._bodies", ["kinspect/native/_bodies.c"],  # body walks: error codes, a body's regular case
              extra_compile_args=FLAGS, optional=True),
    Extension("kinspect.native._tls", ["kinspect/native/_tls.c"],  # a TLS direction's records opened
              extra_compile_args=FLAGS, optional=True),
    Extension("kinspect.native._protobuf", ["kinspect/native/_protobuf.c"],  # Protobuf values to JSON
              extra_compile_args=FLAGS, optional=True, depends=["kinspect/native/_json_out.h"]),
    Extension("kinspect.native._relay", ["kinspect/native/_relay.c"],  # the proxy's byte path
              extra_compile_args=FLAGS, optional=True),
    Extension("kinspect.native._avro", ["kinspect/native/_avro.c"],  # Avro values as JSON text
              extra_compile_args=FLAGS, optional=True, depends=["kinspect/native/_json_out.h"]),
])
