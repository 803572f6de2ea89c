#!/usr/bin/env bash
# Send resources/reward_input.json (or the file given) to the local reward server.
set -euo pipefail
cd "$(dirname "$0")/.."
curl -sS -X POST "http://127.0.0.1:${SERVER_PORT:-8000}/api/v1" \
  -H "Content-Type: application/json" --data-binary "@${1:-resources/reward_input.json}"
echo
