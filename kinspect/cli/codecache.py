"""The generated decoders' bytecode, kept between runs as Python keeps a module's in __pycache__.

Compiling the decoders a capture needs costs 25-80 ms of every run (kinspect/generated.py); a
cached code object loads in tens of microseconds. One file per decoder, named by a hash of its
source and file name, in kinspect's cache (kinspect/cache.py: only a directory of this user's
that no one else can write), in a directory per Python bytecode version, and read only from
files of this user's. A changed generator makes new names; old files are never read again.
Anything unexpected (an unwritable directory, a damaged file) means compiling as before, silently.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys

from kinspect import cache, generated

try:  # hashlib would load OpenSSL for this one digest: 11M instructions of every run's start-up
    from _sha256 import sha256
except ImportError:  # a Python built without it
    from hashlib import sha256

_CODE = type(compile("", "", "exec"))


def directory() -> str | None:
    """This user's cache directory for this Python's bytecode, or None for no cache."""
    root = cache.root()
    if root is None:
        return None
    return os.path.join(root, f"decoders-{sys.implementation.cache_tag}-{importlib.util.MAGIC_NUMBER.hex()}")


class CodeCache:
    """A compiler for kinspect.generated.install: ``(source, filename)`` → code object."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.hits = self.misses = 0

    def __call__(self, source: str, filename: str):
        digest = sha256(f"{filename}\0{source}".encode()).hexdigest()[:40]
        path = os.path.join(self.path, digest)
        code = self._load(path)
        if code is not None:
            self.hits += 1
            return code
        self.misses += 1
        code = compile(source, filename, "exec")
        self._store(path, code)
        return code

    @staticmethod
    def _load(path: str):
        try:
            with open(path, "rb") as f:
                if os.fstat(f.fileno()).st_uid != os.geteuid():
                    return None
                code = marshal.loads(f.read())
        except (OSError, EOFError, ValueError, TypeError):
            return None
        return code if type(code) is _CODE else None

    @staticmethod
    def _store(path: str, code) -> None:
        temporary = f"{path}.{os.getpid()}.tmp"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(marshal.dumps(code))
            os.replace(temporary, path)  # whole or not at all, for runs beside this one
        except OSError:
            try:
                os.unlink(temporary)
            except OSError:
                pass


def install() -> CodeCache | None:
    """Use the cache for the generated decoders from now on, when there is a safe place for it."""
    path = directory()
    if path is None or not cache.safe_dir(path):
        return None
    compiler = CodeCache(path)
    generated.install(compiler)
    return compiler
