#!/usr/bin/env bash
# Installs everything the test suite needs and runs it all: the system's tools from Debian's
# packages (one apt-get update, then only what is missing), and kinspect with the Python test
# dependencies in the virtual environment .venv (created here; a system Python refuses pip
# installs, PEP 668). Usage: bash tests/run.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}  # the interpreter .venv is made from (>= 3.11)
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

packages=()
want() {  # want PACKAGE COMMAND...: the package, unless every command is on PATH
  local package=$1 command
  shift
  for command in "$@"; do
    if ! command -v "$command" >/dev/null 2>&1; then packages+=("$package"); return; fi
  done
}

java_major() {  # the major version of the java on PATH; 0 without one
  local major=""
  if command -v java >/dev/null 2>&1; then
    major=$(java -version 2>&1 | awk -F'"' '/version/ { split($2, v, "."); print (v[1] == 1 ? v[2] : v[1]) + 0; exit }')
  fi
  echo "${major:-0}"
}

want python3 "$PYTHON"
want tshark tshark
want wireshark-common dumpcap editcap mergecap capinfos
want tcpdump tcpdump
want iproute2 ip
want gcc gcc        # builds kinspect/native
want strace strace  # shows that inputs are only ever read
want socat socat    # bench_proxy --peer
want tmux tmux      # the progress bar's test reads a real terminal's screen
want chromium chromium  # kinspect report's pages are loaded in it (tests/integration/test_report_browser.py)
want maven mvn      # the lab's Kafka jars
if [ "$(java_major)" -lt 17 ] || ! command -v javac >/dev/null 2>&1; then
  packages+=(openjdk-17-jdk-headless)  # Kafka 4 and Spark 4 need Java 17 or later
fi
if command -v "$PYTHON" >/dev/null 2>&1; then
  "$PYTHON" -c "import ensurepip, venv" 2>/dev/null || packages+=(python3-venv)
  "$PYTHON" -c "import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" ||
    packages+=(python3-dev)  # headers for kinspect/native
fi

if [ ${#packages[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "tests/run.sh: install these (Debian package names), then run it again: ${packages[*]}" >&2
    exit 1
  fi
  echo "installing system packages: ${packages[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${packages[@]}" >/dev/null
fi
if [ "$(java_major)" -lt 17 ]; then  # an older java stays first on PATH: use Debian's 17
  export JAVA_HOME="/usr/lib/jvm/java-17-openjdk-$(dpkg --print-architecture)"
  export PATH="$JAVA_HOME/bin:$PATH"
fi

if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
  "$PYTHON" -m venv .venv  # also repairs a .venv left without pip
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
export VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH"  # `kinspect`, `python`: the venv's
if [ $# -gt 0 ]; then
  exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
fi
# The whole suite, then the unit tests of the layers the C accelerators serve once more with their
# pure-Python twins forced: each twin promises its C module's output (tests of a C module itself
# are deselected in that run: -m "not needs_c"). The layers above (cli, doctor, groups, report, schemas, spark) reach
# the twins only through these, and run once.
status=0
.venv/bin/python -m pytest -q -p no:cacheprovider || status=$?
KINSPECT_PURE_PYTHON=1 .venv/bin/python -m pytest -q -p no:cacheprovider -m "not needs_c" \
  tests/unit/capture tests/unit/decode tests/unit/native tests/unit/proxy tests/unit/records \
  tests/unit/render tests/unit/storage tests/unit/tls tests/unit/wire tests/unit/test_validate*.py \
  || status=$((status ? status : $?))
exit "$status"
