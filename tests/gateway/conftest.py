"""A real gateway (uvicorn on 127.0.0.1, ephemeral port) over the built-in engine."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


@pytest.fixture
async def gateway(tiny_model_dir):
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway import Gateway

    engine = TransformersEngine.from_pretrained(tiny_model_dir, threads=2)
    gw = await Gateway.start(engine, host="127.0.0.1", port=0, static_keys=("serve-key",))
    yield gw
    await gw.stop(close_engine=True)
