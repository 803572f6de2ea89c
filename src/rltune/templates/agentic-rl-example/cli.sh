#!/usr/bin/env bash
# The Bailian demo's CLI calls, against the rltune server (`rltune` takes the same verbs as
# `dashscope rl`; the server starts on first use).
set -euo pipefail
cd "$(dirname "$0")"

# Run one function locally on an example input (no server):
rltune test-functions -c functions.reward.reward.DemoRewardProcessor -i resources/reward_input.json

# Register (and load) the functions; prints their ids as JSON:
rltune rl register_functions \
  --rollout-classpaths functions.rollout.rollout.CalcXRolloutProcessor \
  --reward-classpaths functions.reward.reward.DemoRewardProcessor \
  --group-reward-classpaths functions.reward.group_reward.DemoGroupRewardProcessor \
  --no-lazy-load

# Test a loaded instance: rltune test_functions INSTANCE_ID -t REWARD -i resources/reward_input.json

# Upload the data and submit the job (YAML), then follow it:
rltune run -c job.yaml
# rltune list; rltune get JOB_ID; rltune logs JOB_ID --follow; rltune cancel JOB_ID
