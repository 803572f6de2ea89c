"""Helpers of the template tests."""

from __future__ import annotations

import importlib.util

import pytest

from rltune.templates import TEMPLATES_DIR


@pytest.fixture
def template_reward():
    """``template_reward(template, cls)``: a new instance of the reward class ``cls`` of the
    shipped template's ``functions/reward.py``, loaded from the file as a workspace would."""

    def load(template: str, cls: str):
        path = TEMPLATES_DIR / template / "functions" / "reward.py"
        spec = importlib.util.spec_from_file_location(f"{template}_reward", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, cls)()

    return load
