"""The packed virtualenv that carries kinspect and its C accelerators to a cluster's executors.

``--py-files`` cannot carry C extensions, so ``kinspect spark --package env.tar.gz`` ships a
whole virtualenv, built with venv-pack and unpacked by Spark on every executor as
``./environment`` (``spark.archives``, or Spark Connect's ``addArtifacts(archive=True)``).

The environment is always a fresh venv made by the running interpreter, never the running one:
the running one may be an editable install, or see system site-packages, which venv-pack
cannot pack honestly. Into it go kinspect (from the source tree the running kinspect comes from,
or ``kinspect==VERSION`` from the package index), and pyarrow and pandas at the driver's
versions (mapInArrow's Arrow batches on both sides). pyspark is not in it: every Spark worker
puts its own pyspark.zip on its Python workers' path.

A venv-pack environment keeps its interpreter as a link to the base Python (``bin/python`` ->
this interpreter's path): every node needs the same Python version at that same path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ENV_NAME = "environment"  # the directory Spark unpacks the archive into on each executor
EXECUTOR_PYTHON = f"./{ENV_NAME}/bin/python"


class PackageError(Exception):
    """The environment could not be built: the message says which step failed and why."""


def archive_uri(path: str) -> str:
    """``spark.archives``' entry: the archive, unpacked as ./environment."""
    return f"{os.path.abspath(path)}#{ENV_NAME}"


def kinspect_source() -> str:
    """What pip installs kinspect from: the source tree of the running kinspect when it is one
    (a checkout, installed editable or not), else this version from the package index."""
    import kinspect
    root = Path(kinspect.__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "kinspect" / "native").is_dir():
        return str(root)
    return f"kinspect=={metadata.version('kinspect')}"


def requirements() -> list[str]:
    """kinspect and the Arrow side of mapInArrow, pinned to this driver's versions."""
    return [kinspect_source()] + [f"{name}=={metadata.version(name)}" for name in ("pyarrow", "pandas")]


def _run(step: str, argv: list[str], **kwargs) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
        raise PackageError(f"{step} failed ({' '.join(argv[:4])} ...): " + " | ".join(tail))
    return result.stdout


NATIVE_CHECK = "import json, kinspect.native as n; print(json.dumps(n.status()))"


def native_status(python: str) -> dict[str, bool]:
    """Which C accelerators ``python`` loads, run from a directory that holds no kinspect."""
    with tempfile.TemporaryDirectory() as cwd:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KINSPECT_PURE_PYTHON")}
        return json.loads(_run("checking the accelerators", [python, "-c", NATIVE_CHECK], cwd=cwd, env=env))


def build(output: str, python: str = sys.executable, log=lambda line: None) -> dict[str, bool]:
    """Build the packed environment at ``output`` (.tar.gz, .tgz, .tar or .zip); returns which
    C accelerators the environment's Python loads. PackageError when a step fails."""
    try:
        import venv_pack
    except ImportError:
        raise PackageError("venv-pack not installed: pip install 'kinspect[spark]'") from None
    output = os.path.abspath(output)
    os.makedirs(os.path.dirname(output), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kinspect-env-") as tmp:
        env = os.path.join(tmp, "env")
        log(f"creating a virtualenv with {python}")
        _run("creating the virtualenv", [python, "-m", "venv", env], cwd=tmp)  # -m: nothing of the working directory
        env_python = os.path.join(env, "bin", "python")
        wanted = requirements()
        log("installing " + " ".join(wanted))
        clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_USER")}
        _run("pip install", [env_python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                             "-q", *wanted], env=clean, cwd=tmp)
        native = native_status(env_python)
        log(f"packing {env} into {output}")
        _pack(venv_pack, env, output)
    return native


def _pack(venv_pack, env: str, output: str) -> None:
    """``env`` packed into a new file of a new name beside ``output`` (mkstemp), then renamed to
    ``output``: whatever ``output`` was (a link planted in a shared directory, say), it is replaced,
    never written through."""
    name = os.path.basename(output)
    suffix = ".tar.gz" if name.endswith(".tar.gz") else os.path.splitext(name)[1]  # venv-pack's format
    try:
        fd, partial = tempfile.mkstemp(prefix=".kinspect-env-", suffix=suffix, dir=os.path.dirname(output))
    except OSError as e:
        raise PackageError(f"cannot write beside {output}: {e.strerror or e}") from e
    os.close(fd)
    try:
        try:
            venv_pack.pack(prefix=env, output=partial, force=True)
        except Exception as e:  # venv-pack's own errors (VenvPackException) and I/O errors
            raise PackageError(f"venv-pack failed: {e}") from e
        try:
            os.replace(partial, output)
        except OSError as e:
            raise PackageError(f"cannot write {output}: {e.strerror or e}") from e
    finally:
        if os.path.lexists(partial):
            os.unlink(partial)
