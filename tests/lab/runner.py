"""Run one lab client script as a subprocess (optionally inside a namespace), return its manifest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class ClientFailed(RuntimeError):
    pass


def run_client(module: str, args: list[str], *, exec_prefix: list[str] = (),
               log_path: Path | None = None, timeout: float = 180) -> dict:
    """module: a name under tests.lab.clients, e.g. "librdkafka_client"."""
    argv = [*exec_prefix, sys.executable, "-m", f"tests.lab.clients.{module}", *args]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(proc.stderr)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-30:])
        raise ClientFailed(f"{' '.join(argv)} exited {proc.returncode}:\n{tail}")
    manifest = json.loads(proc.stdout)
    manifest["command"] = ["python" if a == sys.executable else a for a in argv]
    return manifest
