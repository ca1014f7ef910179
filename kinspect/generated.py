"""Where generated source becomes code: the body decoders and storage/structs.py's readers are
Python source generated from Kafka's schemas (wire/codegen.py), compiled on first use.

``code(source, filename)`` is compile() unless an adapter installed another compiler with the
same signature: the command line installs cli/codecache.py's, which keeps the bytecode between
runs. The core itself reads and writes no files.
"""

from __future__ import annotations

from typing import Callable

Compiler = Callable[[str, str], object]


def _compile(source: str, filename: str):
    return compile(source, filename, "exec")


_compiler: Compiler = _compile


def code(source: str, filename: str):
    """The code object of generated module source ``source``."""
    return _compiler(source, filename)


def install(compiler: Compiler | None) -> None:
    """Use ``compiler`` from now on (None: plain compile())."""
    global _compiler
    _compiler = compiler if compiler is not None else _compile
