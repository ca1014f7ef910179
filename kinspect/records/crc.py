"""CRC-32C (Castagnoli), the checksum of v2 record batches and of other files a broker writes.

The crc32c package computes it. Its ``__init__`` asks importlib.metadata for the package's own
version, which imports email, socket and more: 20 ms of every kinspect run's start-up, for a
string kinspect never reads. So its C extension is loaded directly, and the package imported
the usual way only when that fails (a different layout, a build without the extension).
"""

from __future__ import annotations

import os


def _load():
    from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader
    from importlib.util import find_spec, module_from_spec, spec_from_loader

    try:
        package = find_spec("crc32c")  # finds, does not import
        for directory in (package.submodule_search_locations or []) if package else []:
            for suffix in EXTENSION_SUFFIXES:
                path = os.path.join(directory, "_crc32c" + suffix)
                if os.path.isfile(path):
                    loader = ExtensionFileLoader("crc32c._crc32c", path)
                    module = module_from_spec(spec_from_loader("crc32c._crc32c", loader))
                    loader.exec_module(module)
                    return module.crc32c
    except (ImportError, OSError, AttributeError, ValueError):
        pass
    from crc32c import crc32c as function
    return function


crc32c = _load()
