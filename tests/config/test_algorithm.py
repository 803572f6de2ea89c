"""Presets of DESIGN.md §6 and per-knob overrides."""

from rltune.config import HyperParameters, resolve_algorithm


def test_presets():
    grpo = resolve_algorithm(HyperParameters(algorithm="grpo"))
    assert (grpo.importance_sampling_level, grpo.clip_ratio_low, grpo.clip_ratio_high) == (
        "token", 0.2, 0.2)
    assert grpo.use_kl_loss and grpo.kl_estimator == "k3"
    gspo = resolve_algorithm(HyperParameters(algorithm="gspo"))
    assert gspo.importance_sampling_level == "sequence"
    assert (gspo.clip_ratio_low, gspo.clip_ratio_high, gspo.loss_agg_mode) == (3e-4, 4e-4,
                                                                               "seq-mean")
    dapo = resolve_algorithm(HyperParameters(algorithm="dapo", max_length=1024,
                                             max_prompt_length=512))
    assert not dapo.use_kl_loss and dapo.dynamic_sampling and dapo.loss_agg_mode == "token-mean"
    assert dapo.overlong_buffer_len == 128  # auto: a quarter of the 512-token response budget
    opd = resolve_algorithm(HyperParameters(), "pg_opd")
    assert opd.advantage_estimator == "opd" and opd.clip_ratio_low is None


def test_every_knob_settable_alone():
    k = resolve_algorithm(HyperParameters(algorithm="grpo", loss_agg_mode="token-mean",
                                          clip_ratio_high=0.3, use_kl_loss=False,
                                          kl_estimator="k2", dynamic_sampling=True,
                                          norm_adv_by_std=False, entropy_coeff=0.01))
    assert (k.loss_agg_mode, k.clip_ratio_high, k.use_kl_loss, k.kl_estimator) == (
        "token-mean", 0.3, False, "k2")
    assert k.dynamic_sampling and not k.norm_adv_by_std and k.entropy_coeff == 0.01
    assert k.clip_ratio_low == 0.2  # untouched knobs keep the preset


def test_warmup_and_steps():
    hp = HyperParameters(batch_size=4, n_epochs=2)
    assert hp.total_steps(10) == 4
    assert hp.warmup_steps(100) == 3
    assert HyperParameters(lr_warmup_steps=5).warmup_steps(100) == 5
