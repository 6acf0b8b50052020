#!/usr/bin/env bash
# setup.telemetry: the chip probe's client (Google's tpu-info package, which brings grpcio and
# the RuntimeMetricService stubs) in a private venv at ~/.tpu-reconciler/telemetry, used only
# by the probe (adapters/telemetry_probe.py). Run by bootstrap on every worker; idempotent.
set -euo pipefail
venv="$HOME/.tpu-reconciler/telemetry"
mkdir -p "$HOME/.tpu-reconciler" && chmod 700 "$HOME/.tpu-reconciler"
if "$venv/bin/python" -c 'import grpc, tpu_info.proto.tpu_metric_service_pb2_grpc' 2>/dev/null; then
    echo "telemetry client already installed in $venv"
    exit 0
fi
if ! python3 -m venv "$venv" 2>/dev/null; then
    # Debian/Ubuntu images without ensurepip: a venv without pip, pip fetched into it
    python3 -m venv --without-pip "$venv"
    curl -fsSL https://bootstrap.pypa.io/get-pip.py | "$venv/bin/python" - -q
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check 'tpu-info>=0.14'
"$venv/bin/python" -c 'import grpc, tpu_info.proto.tpu_metric_service_pb2_grpc'
echo "telemetry client installed in $venv"
