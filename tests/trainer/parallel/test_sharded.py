"""Sharded checkpoints (``checkpoint_format: sharded``, ``rltune.trainer.parallel.sharded``) in one
process: ``save_checkpoint`` writes DCP shards and no full weights, ``restore_training_state``
continues the updater exactly, and publishing consolidates the shards into a Hugging Face
folder. The multi-rank cases are in test_ray_ranks.py and test_ray_ranks_job.py (slow)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from rltune.trainer.checkpoint import restore_training_state, save_checkpoint
from rltune.trainer.parallel.sharded import SHARDED_DIR, is_sharded, sharded_weights
from rltune.trainer.testing import tiny_qwen2
from rltune.trainer.update import PolicyUpdater

_spec = importlib.util.spec_from_file_location(
    "dp_update", Path(__file__).parents[1] / "fixtures" / "dp_update.py")
dp_update = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dp_update)


def _updater(seed: int = 0) -> PolicyUpdater:
    hp, knobs = dp_update.hyper()
    return PolicyUpdater(tiny_qwen2(seed=seed), hp, knobs, total_steps=4)


def test_a_sharded_checkpoint_resumes_exactly_and_publishes_as_a_hf_folder(tmp_path):
    torch.set_num_threads(1)
    up = _updater()
    up.update(dp_update.batch(1))
    path = save_checkpoint(tmp_path / "ckpts", step=1, model=up.model, updater=up,
                           trainer_state={"epoch": 0}, sharded=True)
    assert is_sharded(path) and not (path / "model.safetensors").exists()
    assert list((path / SHARDED_DIR).glob("*.distcp"))
    saved = {k: v.clone() for k, v in up.model.state_dict().items()}

    other = _updater(seed=1)  # other weights: everything must come from the checkpoint
    assert restore_training_state(path, other)["step"] == 1
    assert other.step == 1
    up.update(dp_update.batch(2))
    other.update(dp_update.batch(2))
    for name, w in up.model.state_dict().items():
        assert torch.equal(other.model.state_dict()[name], w), name  # optimizer state too

    from transformers import AutoModelForCausalLM

    from rltune.lifecycle.publish import link_model_files

    target = tmp_path / "published" / "m"
    link_model_files(path, target)
    assert (target / "model.safetensors").exists() and not (target / SHARDED_DIR).exists()
    loaded = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).state_dict()
    for name, w in saved.items():
        assert torch.equal(loaded[name], w), name
    assert set(sharded_weights(path)) <= set(saved)


def test_a_sharded_checkpoint_is_consolidated_by_the_cli_and_refused_as_a_model(tmp_path):
    from typer.testing import CliRunner

    from rltune.cli.main import app
    from rltune.paths import check_model
    from rltune.sdk.errors import ValidationError

    up = _updater()
    up.update(dp_update.batch(1))
    path = save_checkpoint(tmp_path / "ckpts", step=1, model=up.model, updater=up,
                           sharded=True)
    try:  # a model spec naming it says how to consolidate it, instead of failing to load
        check_model(str(path))
        raise AssertionError("a sharded checkpoint was accepted as a model folder")
    except ValidationError as err:
        assert "sharded checkpoint" in err.message and "models consolidate" in err.hint
    res = CliRunner().invoke(app, ["models", "consolidate", str(path), "--out",
                                   str(tmp_path / "hf")])
    assert res.exit_code == 0, res.output
    assert check_model(str(tmp_path / "hf")).kind == "dir"
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "hf", dtype=torch.float32)
    for name, w in up.model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], w), name
    res = CliRunner().invoke(app, ["models", "consolidate", str(tmp_path / "ckpts"), "--out",
                                   str(tmp_path / "x")])
    assert res.exit_code == 2 and "no sharded/" in res.output
