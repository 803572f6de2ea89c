"""The advisor writes each alert once to alerts.jsonl; the advisor: block refuses unknown keys."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from rltune.config import JobConfig
from rltune.config.advisor import AdvisorConfig
from rltune.doctor import Advisor, read_alerts

CLIP = "trajectory/response_length/clip_ratio"


def test_an_alert_is_written_once_while_it_persists_and_again_after_it_clears(tmp_path):
    adv = Advisor(AdvisorConfig(thresholds={"P9": {"window": 1}}), tmp_path)
    seen = [[a.code for a in adv.observe(i, {CLIP: c})]
            for i, c in enumerate([0.9, 0.9, 0.0, 0.9], start=1)]
    assert seen == [["P9"], [], [], ["P9"]]
    lines = [json.loads(x) for x in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert [(x["step"], x["code"]) for x in lines] == [(1, "P9"), (4, "P9")]
    assert set(lines[0]) == {"step", "code", "title", "evidence", "advice"}
    assert lines[0]["evidence"]["clip_ratio"] == 0.9 and "max_length" in lines[0]["advice"]
    # a resumed job replaying step 4 does not write its alert twice
    again = Advisor(AdvisorConfig(thresholds={"P9": {"window": 1}}), tmp_path)
    again.observe(4, {CLIP: 0.9})
    assert len(read_alerts(tmp_path)) == 2


@pytest.mark.parametrize("block, named", [
    ({"enable": True}, "enable"),
    ({"off": ["P99"]}, "P99"),
    ({"thresholds": {"P9": {"clip": 0.3}}}, "clip"),
    ({"thresholds": {"hack/lenght": {}}}, "hack/lenght"),
])
def test_unknown_advisor_keys_are_refused_naming_the_key(block, named):
    with pytest.raises((ValidationError, Exception)) as info:
        JobConfig(model={"name": "nano"}, advisor=block)
    assert named in str(info.value)


def test_the_advisor_block_is_read_from_the_job():
    job = JobConfig(model={"name": "nano"}, advisor={"off": ["P2"],
                                                     "thresholds": {"P9": {"clip_ratio": 0.3}}})
    assert job.advisor.off == ["P2"] and job.advisor.threshold("P9", "clip_ratio") == 0.3
    assert JobConfig(model={"name": "nano"}).advisor.enabled is True


def test_docs_list_every_code_with_its_thresholds_and_advice():
    from pathlib import Path

    from rltune.config.advisor import DEFAULT_THRESHOLDS
    from rltune.doctor import DETECTORS

    text = (Path(__file__).parents[2] / "docs" / "doctor.md").read_text()
    for code, det in DETECTORS.items():
        section = text.split(f"### `{code}`:", 1)[1].split("###", 1)[0]
        assert det.advice in section, code
        for name in DEFAULT_THRESHOLDS[code]:
            assert f"`{name}`" in section, (code, name)


@pytest.mark.parametrize(("hp", "words"), [
    ({"learning_rate": 5e-5}, "SFT learning rate"),
    ({"n_epochs": 10}, "n_epochs 10"),
    ({"kl_loss_coef": 0}, "kl_loss_coef 0 outside DAPO"),
    ({"max_length": 32768, "max_prompt_length": 1024}, "max_length 32768"),
])
def test_the_seed_anti_patterns_warn(hp, words):
    from rltune.config import JobConfig
    from rltune.doctor.plan import anti_patterns, warnings

    job = JobConfig(model={"name": "Qwen/Qwen2.5-0.5B-Instruct"},
                    training={"hyper_parameters": hp})
    assert any(words in w for w in warnings(job, seconds_per_step=None, cores=64, val_rows=0))
    assert anti_patterns(JobConfig(model={"name": "nano"})) == []
    assert not anti_patterns(JobConfig(model={"name": "nano"}, training={"hyper_parameters": {
        "algorithm": "dapo", "kl_loss_coef": 0}}))


def _model_dir(path, hidden, layers, vocab, built=None):
    import json

    path.mkdir()
    (path / "config.json").write_text(json.dumps({
        "hidden_size": hidden, "num_hidden_layers": layers, "intermediate_size": 4 * hidden,
        "vocab_size": vocab, "tie_word_embeddings": True}))
    if built is not None:
        (path / "rltune_model.json").write_text(json.dumps({"parameters": built}))
    return path


def test_the_learning_rate_bound_follows_the_model_size(tmp_path):
    from rltune.config import JobConfig
    from rltune.doctor.plan import anti_patterns, model_parameters

    tiny = _model_dir(tmp_path / "tiny", 128, 4, 848)
    llm = _model_dir(tmp_path / "llm", 896, 24, 151_936)
    built = _model_dir(tmp_path / "built", 896, 24, 151_936, built=1_093_760)
    assert model_parameters(str(tiny)) == 4 * (4 * 128 * 128 + 3 * 128 * 512) + 848 * 128
    assert model_parameters(str(llm)) > 400_000_000
    assert model_parameters(str(built)) == 1_093_760  # what the build counted wins
    assert model_parameters(str(tmp_path / "absent")) is None

    def lr_warning(model, lr):
        job = JobConfig(model={"name": model}, training={"hyper_parameters": {
            "learning_rate": lr, "kl_loss_coef": 0.001}})
        found = [w for w in anti_patterns(job, parameters=model_parameters(model))
                 if w.startswith("learning_rate")]
        return found[0] if found else None

    assert lr_warning(str(tiny), 4e-4) is None  # the multistep template's rate
    assert lr_warning("nano-multistep", 4e-4) is None  # a demo name, built or not
    assert "collapsed" in lr_warning(str(tiny), 1e-3)
    assert "SFT learning rate" in lr_warning(str(llm), 4e-4)
    assert lr_warning(str(built), 4e-4) is None
    assert "SFT learning rate" in lr_warning(str(tmp_path / "absent"), 4e-4)  # not known


def test_n_rollouts_1_and_a_max_length_far_above_the_data_warn():
    from rltune.config import JobConfig
    from rltune.doctor.plan import anti_patterns

    job = JobConfig(model={"name": "nano"}, teacher_model="nano",
                    training={"hyper_parameters": {"n_rollouts": 1, "max_length": 4096}})
    text = " ".join(anti_patterns(job, mean_tokens=100))
    assert "n_rollouts 1" in text and "rollouts average 100 tokens" in text
