"""The length rule (``rltune.config.lengths``): what is derived from the model's context when a
job leaves its lengths unset, and what is refused."""

from __future__ import annotations

import pytest

from rltune.config.hyperparams import HyperParameters
from rltune.config.lengths import fit_lengths
from rltune.sdk.errors import ConfigError


def lengths(context, **hp):
    fitted, notes = fit_lengths(HyperParameters(**hp), context, model="m")
    return fitted.max_length, fitted.max_prompt_length, bool(notes)


def test_unset_lengths_follow_the_models_context():
    assert lengths(None) == (2048, 1024, False)  # no context known: the defaults
    assert lengths(4096) == (2048, 1024, False)
    assert lengths(1024) == (1024, 512, True)
    assert lengths(1024, max_prompt_length=900) == (1024, 900, True)
    # a max_length alone: its response budget is kept; the prompt takes the rest
    assert lengths(1024, max_length=1280) == (1024, 768, True)
    assert lengths(None, max_length=1024) == (1024, 512, False)  # was an error: no room
    assert lengths(4096, max_length=1500) == (1500, 1024, False)  # as before


def test_trl_and_verl_response_lengths_alone_fit_a_small_model():
    assert lengths(1024, max_completion_length=256) == (1024, 768, True)
    assert lengths(1024, **{"data.max_response_length": 300}) == (1024, 724, True)
    assert lengths(None, max_completion_length=256) == (1280, 1024, False)


def test_what_cannot_fit_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match="max_length 4096 is beyond the model's context of "
                       "1024 tokens") as err:
        fit_lengths(HyperParameters(max_length=4096, max_prompt_length=200), 1024, model="m")
    assert err.value.where == "training.hyper_parameters.max_length"
    assert "at most 1024" in err.value.hint
    with pytest.raises(ConfigError, match="response budget of 1024 tokens, over half"):
        fit_lengths(HyperParameters(max_length=2048), 1024, model="m")
    with pytest.raises(ConfigError, match="max_prompt_length 1000 leaves no room") as err:
        fit_lengths(HyperParameters(max_prompt_length=1000), 1000, model="m")
    assert err.value.where == "training.hyper_parameters.max_prompt_length"
