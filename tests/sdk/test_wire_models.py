"""The wire models parse the cloud SDK's JSON and dump it back unchanged."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from rltune.sdk import (
    AgentOutput,
    GroupRewardInput,
    GroupRewardOutput,
    RewardInput,
    RewardOutput,
    RolloutInput,
    RolloutOutput,
    TaskStatus,
)

WIRE = Path(__file__).parent / "wire"
CASES = {
    "rollout_input.json": RolloutInput,
    "reward_input.json": RewardInput,
    "group_reward_input.json": GroupRewardInput,
    "rollout_output.json": RolloutOutput,
    "reward_output.json": RewardOutput,
    "group_reward_output.json": GroupRewardOutput,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_wire_example_round_trips(name):
    raw = json.loads((WIRE / name).read_text())
    model = CASES[name].model_validate(raw)
    assert model.to_wire() == raw
    assert json.loads(json.dumps(model.to_wire())) == raw


def test_extra_keys_kept_as_attributes():
    raw = json.loads((WIRE / "rollout_input.json").read_text())
    ri = RolloutInput.model_validate(raw)
    assert ri.additional_field == {"anything": [1, 2, 3]}


def test_api_key_is_secret_and_masked_in_logs():
    ri = RolloutInput.model_validate(json.loads((WIRE / "rollout_input.json").read_text()))
    assert ri.model_resource.api_key.get_secret_value() == "sk-rollout-0001"
    assert "sk-rollout-0001" not in repr(ri)
    assert ri.model_dump(mode="json")["model_resource"]["api_key"] == "**********"


def test_func_type_defaults_and_optional_metadata():
    ri = RolloutInput(
        messages=[], model_resource={"model_name": "m", "base_url": "u", "api_key": "k"}
    )
    assert ri.func_type.value == "rollout"
    assert ri.request_metadata is None
    assert RewardInput(agent_output={}).func_type.value == "reward"
    assert GroupRewardInput(agent_outputs=[]).func_type.value == "group_reward"


def test_defaults_match_cloud_sdk():
    assert AgentOutput().rollout_metrics == {}
    out = RolloutOutput()
    assert out.status is TaskStatus.SUCCESS and out.error is None and out.error_code is None
    assert RewardOutput(reward={"reward_score": 1}, error_code=524).error_code == "524"


def test_required_fields_are_enforced():
    with pytest.raises(ValidationError, match="model_resource"):
        RolloutInput(messages=[])
    with pytest.raises(ValidationError, match="agent_output"):
        RewardInput()
    with pytest.raises(ValidationError, match="reward_score"):
        RewardOutput(reward={})
    with pytest.raises(ValidationError, match="rollout_id"):
        RolloutInput.model_validate(
            {
                "messages": [],
                "model_resource": {"model_name": "m", "base_url": "u", "api_key": "k"},
                "request_metadata": {"job_id": "j", "sample_id": "s", "attempt_id": "a"},
            }
        )


def test_status_accepts_only_success_or_failed():
    assert RolloutOutput(status="failed").status is TaskStatus.FAILED
    with pytest.raises(ValidationError):
        RolloutOutput(status="maybe")
