"""Ark job files: an error names the Ark key the user wrote and its line, whether it is found
while translating or when the translated config is validated (issue 30, item 17)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import rltune.templates
from rltune.config import load_job_config
from rltune.sdk.errors import ConfigError

TEMPLATE = Path(rltune.templates.__file__).parent / "rl_demo"


@pytest.fixture
def job_file(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(TEMPLATE, ws)
    return ws / "job.yaml"


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.parametrize("old, new, key", [
    ("lr: '0.0002'", "lr: 'abc'", "hyperparameters.lr"),
    ("num_generations: '8'", "num_generations: '0'", "hyperparameters.num_generations"),
    ("save_model_limit: 2", "save_model_limit: -5", "save_model_limit"),
])
def test_a_bad_value_names_the_ark_key_and_its_line(job_file, old, new, key):
    text = job_file.read_text()
    assert old in text
    text = text.replace(old, new)
    job_file.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_job_config(job_file)
    exc = err.value
    message = exc.message if exc.where else str(exc)
    assert key in message, message
    line = _line(text, new.split(":")[0] + ":")
    assert f"job.yaml:{line}" in str(exc), (str(exc), line)


def test_a_translation_error_is_at_the_ark_keys_line(job_file):
    text = job_file.read_text().replace("    name: nano", "    name: nano\n    bogus: 1")
    job_file.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_job_config(job_file)
    assert err.value.where == f"{job_file}:{_line(text, 'bogus')}"
    assert "model_reference.foundation_model.bogus" in err.value.message
