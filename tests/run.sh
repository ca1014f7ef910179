#!/usr/bin/env bash
# Installs everything the test suite needs (system packages, Python packages) and runs it all.
# Usage: bash tests/run.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

need=()
for tool in tshark tcpdump dumpcap editcap ip gcc strace; do
  command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
if [ ${#need[@]} -gt 0 ]; then  # gcc builds kinspect/native; strace shows inputs are only read
  echo "installing system packages for: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq tshark tcpdump iproute2 gcc strace socat >/dev/null  # socat: bench_proxy --peer
fi
python3 -c "import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" || {
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-dev >/dev/null  # headers for kinspect/native
}
command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 || {
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null
}

python3 -m pip install -q --disable-pip-version-check -e '.[test]'
exec python3 -m pytest -q -p no:cacheprovider "$@"
