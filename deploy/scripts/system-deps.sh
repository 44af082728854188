#!/usr/bin/env bash
# Installs what pip cannot: the venv module (Debian splits it out of python3), for tests a C compiler
# and Python's headers (the compiled record scan, storage/_cscan.c) and, for Spark only, a headless JRE.
# Installs through apt only when running as root; otherwise says exactly what to install.
# Modes: `run` (default, make run): the venv module only; a broker or controller host needs no JRE,
# pyspark is the [spark] extra; without a C compiler it only notes that produce validation will use the
# slower pure-Python scan. `spark`: plus the JRE, for hosts that run `kraftlog snapshot rebuild`.
# `test` (make test, which installs '.[dev]' and so pyspark): the JRE, the C compiler and headers, and
# the optional tools below.
# `librdkafka` (make librdkafka-suite): the C toolchain and the headers librdkafka's configure uses
# for what the suite exercises (OpenSSL, SASL for SCRAM, zlib, zstd, lz4) and RapidJSON (tests 0053,
# 0101 and 0110 skip themselves without it).
# `system-deps.sh test` (make test) also wants systemd-analyze, which tests/integration/test_deploy_scripts.py runs on
# the units in deploy/systemd/: Debian's `systemd` package, installed only as root and only then;
# without root its test is skipped, so it is never a reason to fail here; likewise iproute2 for the chaos
# test's network partitions. `make run` never installs either.
set -euo pipefail

purpose=${1:-run}
case "$purpose" in
  run | spark | test | librdkafka) ;;
  *) echo "usage: $0 [run|spark|test|librdkafka]" >&2; exit 2 ;;
esac
optional=()
if [ "$purpose" = "test" ] && ! command -v systemd-analyze >/dev/null 2>&1; then
  optional+=("systemd")
fi
# the chaos test cuts links between network namespaces with iproute2's `ip` (root only; without it the
# run skips only its network partitions)
if [ "$purpose" = "test" ] && ! command -v ip >/dev/null 2>&1; then
  optional+=("iproute2")
fi

python_bin=$(command -v python3.11 || command -v python3 || true)
missing=()
if [ -z "$python_bin" ]; then
  echo "kraftlog needs Python >= 3.11: install python3 (Debian/Ubuntu: apt-get install python3)" >&2
  exit 1
fi
if ! "$python_bin" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "kraftlog needs Python >= 3.11, found $("$python_bin" --version)" >&2
  exit 1
fi
ver=$("$python_bin" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
if ! "$python_bin" -c 'import ensurepip, venv' 2>/dev/null; then
  missing+=("python${ver}-venv")
fi
# The compiled records scan (storage/_cscan.c) needs a C compiler and Python's headers at install.
# Without them the install goes on with the pure-Python scan (slower produce validation), so `run`
# only notes it; `test` requires them (tests/fuzz/test_fuzz_cscan.py checks the module is built).
compiler=()
if ! command -v cc >/dev/null 2>&1; then
  compiler+=("gcc")
fi
if ! "$python_bin" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  compiler+=("python${ver}-dev")
fi
if [ "$purpose" = "test" ]; then
  missing+=("${compiler[@]}")
elif [ ${#compiler[@]} -gt 0 ]; then
  echo "note: without ${compiler[*]} kraftlog installs with the pure-Python record scan (slower produce" \
       "validation); install them before pip installs kraftlog to get the compiled one" >&2
fi
if [ "$purpose" != "run" ] && ! command -v java >/dev/null 2>&1; then
  missing+=("default-jre-headless")
fi
# kcat: one of the real Kafka clients the Kafka listener's tests drive
if [ "$purpose" = "test" ] && ! command -v kcat >/dev/null 2>&1; then
  missing+=("kcat")
fi
if [ "$purpose" = "librdkafka" ]; then
  for pkg in gcc g++ make pkg-config git libssl-dev libsasl2-dev zlib1g-dev libzstd-dev liblz4-dev rapidjson-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
fi
if [ ${#missing[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  packages=("${missing[@]}" "${optional[@]}")
  echo "installing system packages: ${packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${packages[@]}"
elif [ ${#missing[@]} -eq 0 ]; then
  echo "note: without ${optional[*]} (sudo apt-get install -y ${optional[*]}) the systemd unit check or the" \
       "chaos test's network partitions are skipped" >&2
else
  echo "missing system packages: ${missing[*]}" >&2
  echo "install them first, e.g.: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
