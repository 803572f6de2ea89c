"""Algorithm presets (rltune.config.algorithm) and per-knob overrides."""

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


def test_each_knob_is_declared_once_and_its_override_is_derived():
    from typing import Optional

    from rltune.config.algorithm import (
        KNOB_NAMES,
        KNOBS,
        PRESETS,
        AlgorithmKnobs,
        KnobOverrides,
    )

    fields = HyperParameters.model_fields
    resolved = AlgorithmKnobs.model_fields
    # the static AlgorithmKnobs has exactly one field per knob, of its type and description
    assert set(resolved) == {"algorithm", "kl_loss_coef", *KNOBS}
    # ... and the static KnobOverrides (HyperParameters' base) one per overridable knob
    assert list(KnobOverrides.model_fields) == list(KNOB_NAMES)
    assert issubclass(HyperParameters, KnobOverrides)
    for name, knob in KNOBS.items():
        assert resolved[name].description == knob.text
        assert resolved[name].annotation == knob.resolved_type, name
        assert resolved[name].is_required(), name  # the value comes from the preset
        if not knob.overridable:
            assert name not in fields and name not in KNOB_NAMES
            continue
        field = fields[name]
        assert field.default is None and field.description == knob.text
        assert field.annotation == Optional[knob.type], name
        bounds = {k: getattr(m, k) for m in field.metadata for k in ("ge", "gt", "le", "lt")
                  if getattr(m, k, None) is not None}
        assert bounds == {k: v for k in ("ge", "gt", "le", "lt")
                          if (v := getattr(knob, k)) is not None}, name
        assert all(name in preset for preset in PRESETS.values())  # every preset resolves it


def test_a_knob_override_keeps_its_range_and_error():
    import pytest

    from rltune.config import validate_hyper_parameters
    from rltune.sdk.errors import ConfigError

    with pytest.raises(ConfigError, match=r"clip_ratio_low = 1\.5") as err:
        validate_hyper_parameters({"clip_ratio_low": 1.5})
    assert "[0, 1)" in err.value.hint
    with pytest.raises(ConfigError, match="loss_agg_mode"):
        validate_hyper_parameters({"loss_agg_mode": "token-sum"})
    assert "advantage_estimator" not in HyperParameters.model_fields  # preset-only
