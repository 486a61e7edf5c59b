#!/usr/bin/env bash
# Install streamer into .venv and replay the bundled example workflow to the
# embedded default (jobstate.log + SQLite Stampede DB next to the workflow).
# No servers needed. Output goes to ./streamer-demo (or the directory given).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
.venv/bin/python -m pip install -q --disable-pip-version-check -e .
exec .venv/bin/streamer demo --out "${1:-streamer-demo}"
