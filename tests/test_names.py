"""The name lists of ``rltune.names`` are the config's choices and each registry's keys."""

from __future__ import annotations

import typing

import pytest

from rltune import names


def test_the_config_literals_come_from_the_name_lists():
    from rltune.config.algorithm import AdvantageEstimator, AlgorithmName, LossAggMode
    from rltune.config.job import EngineName, ToolCallParserName
    from rltune.config.observability import TrackerName

    for literal, declared in ((EngineName, names.ENGINES), (TrackerName, names.TRACKERS),
                              (ToolCallParserName, names.TOOL_PARSERS),
                              (AdvantageEstimator, names.ADVANTAGE_ESTIMATORS),
                              (AlgorithmName, names.ALGORITHMS),
                              (LossAggMode, names.LOSS_AGG_MODES)):
        assert typing.get_args(literal) == declared


def test_the_torch_free_registries_match_the_lists():
    from rltune.engine.select import ENGINE_NAMES
    from rltune.gateway.toolcalls import BUILTIN_PARSERS
    from rltune.observability.trackers.base import _IMPLEMENTATIONS

    assert ENGINE_NAMES == names.ENGINES and BUILTIN_PARSERS == names.TOOL_PARSERS
    assert set(_IMPLEMENTATIONS) == set(names.TRACKERS)


def test_the_signal_registry_matches_the_estimators():
    pytest.importorskip("torch")
    from rltune.trainer.signals.table import SIGNALS

    assert tuple(SIGNALS) == names.ADVANTAGE_ESTIMATORS


def test_a_registry_that_drifts_fails_at_import():
    names.check_registry("tracker", names.TRACKERS, names.TRACKERS)
    with pytest.raises(RuntimeError, match="missing trackio; not declared neptune"):
        names.check_registry("tracker", names.TRACKERS,
                             [*names.TRACKERS[:-1], "neptune"])
