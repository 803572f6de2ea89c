"""TRL's own kind of GRPO script, with only its import changed (``trl`` → ``rltune.trl``):
a generated dataset with two reward functions, and one with ``tools=[fn]``. Each trains the
nano model for 1-2 steps in rltune's pipeline, logs through a callback, and saves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("datasets", reason="the scripts build a datasets.Dataset, as TRL's do")
pytest.importorskip("cloudpickle", reason="pip install 'rltune[trl]'")

# Each run starts the gateway, the engine and a worker per function (~7 s on 2 AMD EPYC
# cores): the two-reward script runs by default, the tool loop in the slow tier.

TWO_REWARDS = textwrap.dedent('''
    import json, sys
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    dataset = Dataset.from_list([{"prompt": f"What is {a} + {b}?", "answer": str(a + b)}
                                 for a in range(4) for b in range(2)])

    def reward_len(completions, **kwargs):  # standard prompts: completions are strings
        assert all(isinstance(c, str) for c in completions), completions
        return [-abs(20 - len(c)) / 20 for c in completions]

    def reward_answer(prompts, completions, answer, **kwargs):
        assert all(isinstance(p, str) and p.startswith("What is") for p in prompts), prompts
        return [float(a in c) for c, a in zip(completions, answer)]

    class Logs(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            with open(sys.argv[2] + "/logs.jsonl", "a") as f:
                f.write(json.dumps({"step": state.global_step, **logs}) + "\\n")

    args = GRPOConfig(output_dir=sys.argv[2], per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=16, max_steps=2, logging_steps=1,
                      learning_rate=1e-5, save_strategy="no", reward_weights=[0.5, 1.0])
    trainer = GRPOTrainer(model=sys.argv[1], reward_funcs=[reward_len, reward_answer],
                          args=args, train_dataset=dataset, callbacks=[Logs()])
    trainer.train()
    trainer.save_model()
''')

TOOLS = textwrap.dedent('''
    import sys
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    def calculator(expression: str) -> str:
        """
        Evaluates an arithmetic expression.

        Args:
            expression: The expression to evaluate, e.g. "2 + 3".
        """
        return str(eval(expression, {"__builtins__": {}}))

    dataset = Dataset.from_list([
        {"prompt": [{"role": "user", "content": f"What is {a} * {b}?"}], "answer": str(a * b)}
        for a in range(2, 6) for b in range(3, 5)])

    def correct(completions, answer, **kwargs):
        return [float(a in c[-1]["content"]) for c, a in zip(completions, answer)]

    args = GRPOConfig(output_dir=sys.argv[2], per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=32, max_steps=1, max_tool_calling_iterations=2,
                      save_strategy="no")
    trainer = GRPOTrainer(model=sys.argv[1], reward_funcs=correct, args=args,
                          train_dataset=dataset, tools=[calculator])
    trainer.train()
    trainer.save_model()
''')


ENVIRONMENT = textwrap.dedent('''
    import sys
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    class Calculator:  # one instance per rollout: its state is that rollout's
        def reset(self, a, **kwargs):
            self.a, self.calls = int(a), 0  # None: the prompt as it is (the nano is tiny)

        def calculator(self, expression: str) -> str:
            \"\"\"
            Evaluates an arithmetic expression.

            Args:
                expression: The expression to evaluate, e.g. "2 + 3".
            \"\"\"
            self.calls += 1
            return str(eval(expression, {"__builtins__": {}}))

        def get_reward(self):
            return float(self.a * 1000 + self.calls)

    dataset = Dataset.from_list([
        {"prompt": [{"role": "user", "content": f"What is {a} * {b}?"}], "a": a}
        for a in range(2, 6) for b in range(3, 5)])

    args = GRPOConfig(output_dir=sys.argv[2], per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=32, max_steps=1, max_tool_calling_iterations=2,
                      save_strategy="no")
    trainer = GRPOTrainer(model=sys.argv[1], args=args, train_dataset=dataset,
                          environment_factory=Calculator)
    trainer.train()
''')


def run_script(tmp_path, text: str, model) -> tuple:
    script = tmp_path / "train.py"
    script.write_text(text.replace("from trl import", "from rltune.trl import"))
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([sys.executable, str(script), str(model), str(out)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    records = [json.loads(line) for p in sorted((out / "trajectories").iterdir())
               for line in p.open()]
    return out, records


def test_two_reward_functions_train_log_and_save(tmp_path, nano_model_dir):
    out, records = run_script(tmp_path, TWO_REWARDS, nano_model_dir)
    assert len(records) == 2 * 4  # 2 steps x 4 completions (2 prompts x 2 generations)
    for r in records:
        assert r["status"] == "success", r["error"]
        assert set(r["rewards"]) == {"reward_len", "reward_answer"}
        want = 0.5 * r["rewards"]["reward_len"] + r["rewards"]["reward_answer"]
        assert r["score"] == pytest.approx(want, abs=1e-4)  # reward_weights
    logs = [json.loads(line) for line in (out / "logs.jsonl").open()]
    assert [x["step"] for x in logs] == [1, 2]  # logging_steps=1
    assert {"reward", "rewards/reward_len/mean"} <= set(logs[0])
    # loss and learning_rate come with an update; a step whose groups all tied has none
    assert {"loss", "learning_rate"} <= {key for x in logs for key in x}
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()


@pytest.mark.slow
def test_tools_run_a_multi_turn_loop_through_the_gateway(tmp_path, nano_model_dir):
    out, records = run_script(tmp_path, TOOLS, nano_model_dir)
    assert len(records) == 8
    called = [r for r in records if r["rollout_metrics"]["tool_call_rounds"] >= 1]
    assert called, [r["messages"] for r in records]  # the warm-started nano uses its tool
    for r in called:
        tool = next(m for m in r["messages"] if m["role"] == "tool")
        call = next(m for m in r["messages"] if m.get("tool_calls"))["tool_calls"][0]
        expr = json.loads(call["function"]["arguments"])["expression"]
        assert tool["content"] == str(eval(expr, {"__builtins__": {}}))  # the script's tool
        assert r["num_llm_calls"] >= 2  # the answer after the tool result was sampled too
    assert (out / "model.safetensors").is_file()


@pytest.mark.slow
def test_an_environment_resets_per_rollout_serves_its_tools_and_owns_the_reward(
        tmp_path, nano_model_dir):
    _, records = run_script(tmp_path, ENVIRONMENT, nano_model_dir)
    assert len(records) == 8
    for r in records:
        assert r["status"] == "success", r["error"]
        user = next(m for m in r["messages"] if m["role"] == "user")["content"]
        a = int(user.split()[2])  # the row's `a` column reached reset()
        calls = sum(m["role"] == "tool" for m in r["messages"])
        assert r["rewards"]["Calculator"] == a * 1000 + calls
    assert any(sum(m["role"] == "tool" for m in r["messages"]) for r in records)
