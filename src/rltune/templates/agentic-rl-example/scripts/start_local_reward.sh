#!/usr/bin/env bash
# Serve the demo's reward function on http://127.0.0.1:${SERVER_PORT:-8000} (POST /api/v1,
# GET /health), as the cloud's function server: PROCESSOR_CLASS=module.Class overrides the class.
# The cloud script pip-installs requirements.txt first; here install them yourself, or serve
# with `rltune functions serve --build-venv` (a venv per requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
export FUNC_TYPE=reward
export PROCESSOR_CLASS="${PROCESSOR_CLASS:-functions.reward.reward.DemoRewardProcessor}"
export PYTHONPATH=.
exec "${PYTHON:-python3}" -m rltune.reinforcement.component.server.server
