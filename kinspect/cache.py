"""Where kinspect keeps what it saves between runs, only where no one else could have written it.

``$KINSPECT_CACHE_DIR`` (empty: nothing is kept), else ``$XDG_CACHE_HOME/kinspect`` or
``~/.cache/kinspect``. What is kept there runs (bytecode, a JVM's class archive), so a directory
is used only when it is this user's and writable by no one else (as root under sudo with another
user's HOME, that user's cache is left alone).
"""

from __future__ import annotations

import os
import stat


def root() -> str | None:
    """The cache's root directory, or None when caching is off."""
    path = os.environ.get("KINSPECT_CACHE_DIR")
    if path is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "kinspect")
    return path or None


def safe_dir(path: str) -> bool:
    """The directory exists (made if not), and it and every directory between the cache's root
    and it are this user's, writable by no one else, and no symbolic link (a link planted where
    a cache is made would send kinspect's files elsewhere)."""
    top = root()
    chain = [path]
    if top is not None and os.path.commonpath([os.path.abspath(path), os.path.abspath(top)]) \
            == os.path.abspath(top):
        while os.path.abspath(chain[-1]) != os.path.abspath(top):
            chain.append(os.path.dirname(chain[-1]))
    for directory in reversed(chain):
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            st = os.lstat(directory)
        except OSError:
            return False
        if not (stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022):
            return False
    return True


def own_file(path: str) -> os.stat_result | None:
    """The file's stat when it is a regular file of this user's (not a link to one), else None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() else None
