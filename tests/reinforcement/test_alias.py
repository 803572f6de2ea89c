"""Code written for the cloud SDK runs unchanged once the alias is installed."""

import subprocess
import sys
import textwrap

CLOUD_USER_CODE = """
import asyncio
from dashscope.finetune.reinforcement import (
    AbstractRewardProcessor, RewardInput, RewardOutput, reward_func, sub_reward_func)
from dashscope.finetune.reinforcement.component.data.base_data_model import (
    AgentOutput, TaskStatus)
from dashscope.finetune.reinforcement.component.data.reward_output import Reward
from dashscope.finetune.reinforcement.component.processor import AbstractRolloutProcessor
from dashscope.finetune.reinforcement.component.observability import (
    observe_processor, trace_client, trace_tool, observe_llm, observe_tool, rollout_context)
from dashscope.finetune.reinforcement import RolloutOutput


class CalcRollout(AbstractRolloutProcessor):
    @observe_processor
    async def process(self, input_data):
        return RolloutOutput(agent_output=AgentOutput(
            messages=input_data.messages + [{"role": "assistant", "content": "### ANSWER: 5 ###"}],
            rollout_extra=input_data.rollout_extra))


@reward_func("calc")
class CalcReward(AbstractRewardProcessor):
    @sub_reward_func("exact", 1.0)
    def exact(self, input_data: RewardInput) -> RewardOutput:
        text = input_data.agent_output.messages[-1]["content"]
        ok = str(input_data.ground_truth) in text
        return RewardOutput(reward=Reward(reward_score=float(ok)), status=TaskStatus.SUCCESS)
"""

RUNNER = """
import asyncio, sys
from rltune.reinforcement import install_as_dashscope
assert install_as_dashscope() is True
sys.path.insert(0, {ws!r})
from calc import CalcReward, CalcRollout
from rltune.sdk import RolloutInput, RewardInput, call_process

async def main():
    ro = await call_process(CalcRollout(), RolloutInput(
        messages=[{{"role": "user", "content": "2+3?"}}], rollout_extra={{"solution": "5"}},
        model_resource={{"model_name": "m", "base_url": "http://x", "api_key": "k"}}))
    rw = await call_process(
        CalcReward(), RewardInput(ground_truth="5", agent_output=ro.agent_output))
    print("SCORE", rw.reward.reward_score, ro.agent_output.rollout_extra["solution"])

asyncio.run(main())
"""


def run_python(code, tmp_path):
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )


def test_unmodified_cloud_code_runs(tmp_path):
    (tmp_path / "calc.py").write_text(CLOUD_USER_CODE)
    proc = run_python(RUNNER.format(ws=str(tmp_path)), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "SCORE 1.0 5" in proc.stdout


def test_without_alias_the_cloud_import_fails(tmp_path):
    proc = run_python("import dashscope.finetune.reinforcement", tmp_path)
    assert proc.returncode != 0 and "No module named 'dashscope'" in proc.stderr


def test_alias_steps_aside_for_a_real_dashscope(tmp_path):
    real = tmp_path / "dashscope"
    real.mkdir()
    (real / "__init__.py").write_text("REAL = True\n")
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(tmp_path)!r})
        from rltune.reinforcement import install_as_dashscope
        print("installed", install_as_dashscope())
        import dashscope; print("real", dashscope.REAL)
    """)
    proc = run_python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "installed False" in proc.stdout and "real True" in proc.stdout


def test_config_names_resolve_lazily():
    import rltune.reinforcement as r

    assert "TuningModel" in r.__all__
