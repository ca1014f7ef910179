"""What `kinspect spark` needs from its environment, checked before anything of Spark is
imported: pyspark, pyarrow and pandas (mapInArrow wants it), and a Java runtime recent enough
for the installed Spark (with --remote, Spark Connect's client libraries instead of Java).
Each shortfall is one line saying what to install or set (SparkMissing)."""

from __future__ import annotations

import os
import re
import shutil

# Spark Connect's client (pyspark.sql.connect) needs these; the spark extra installs them
CONNECT_MODULES = {"grpc": "grpcio", "grpc_status": "grpcio-status", "google.rpc": "googleapis-common-protos"}
INSTALL_JAVA = "install Java 17 or newer (apt-get install openjdk-17-jre-headless)"


class SparkMissing(Exception):
    """pyspark, pyarrow, pandas or Java is missing or unusable: the message says what to install or set."""


def installed(module: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package is missing; a module left half-imported
        return False


def check_requirements(connect: bool = False) -> None:
    """SparkMissing unless pyspark, pyarrow and a usable Java runtime (with ``connect``: Spark
    Connect's client libraries instead of Java) can be found."""
    missing = [name for name in ("pyspark", "pyarrow", "pandas") if not installed(name)]
    if connect:
        missing += [package for module, package in CONNECT_MODULES.items() if not installed(module)]
    if missing:
        raise SparkMissing(f"{' and '.join(missing)} not installed: pip install 'kinspect[spark]'"
                           + ("" if connect else " (and Java 17 or newer)"))
    if not connect:
        problem = java_problem(os.environ.get("JAVA_HOME"), _least_java())
        if problem:
            raise SparkMissing(problem)


def java_problem(java_home: str | None, least: int) -> str | None:
    """Why the Java pyspark would start cannot run Spark, or None. pyspark starts
    $JAVA_HOME/bin/java when JAVA_HOME is set (whatever is on PATH), else the java on PATH."""
    if java_home:
        java = os.path.join(java_home, "bin", "java")
        if not os.access(java, os.X_OK):
            return (f"JAVA_HOME={java_home} holds no bin/java: set JAVA_HOME to a Java {least}+ installation "
                    f"(or unset it to use the java on PATH)")
        where = f"JAVA_HOME={java_home}"
    else:
        java = shutil.which("java")
        if java is None:
            return f"no Java runtime found: {INSTALL_JAVA}, or set JAVA_HOME"
        where = java
    version = java_version(java)
    if version is not None and version < least:
        return (f"{where} is Java {version}; this Spark needs Java {least} or newer: {INSTALL_JAVA} "
                f"and set JAVA_HOME to it")
    return None


def java_version(java: str) -> int | None:
    """The major version of the Java ``java`` belongs to, from its installation's release file
    (no JVM started); None when it cannot be told."""
    home = os.path.dirname(os.path.dirname(os.path.realpath(java)))
    try:
        with open(os.path.join(home, "release"), encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 16)
    except OSError:
        return None
    found = re.search(r'^JAVA_VERSION="(?:1\.)?(\d+)', text, re.MULTILINE)
    return int(found.group(1)) if found else None


def _least_java() -> int:
    """The oldest Java the installed Spark runs on: 17 for Spark 4, 8 before."""
    from importlib import metadata
    try:
        major = int(metadata.version("pyspark").split(".")[0])
    except (metadata.PackageNotFoundError, ValueError):
        return 17
    return 17 if major >= 4 else 8
