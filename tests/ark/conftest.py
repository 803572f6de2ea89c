"""A real policy gateway over the nano demo model, served from a background thread so that
CLI commands run in subprocesses can reach it."""

from __future__ import annotations

import asyncio
import threading

import pytest


@pytest.fixture(scope="session")
def nano_endpoint(nano_model_dir):
    pytest.importorskip("torch")
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway import Gateway

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start():
        engine = TransformersEngine.from_pretrained(nano_model_dir, threads=1)
        return await Gateway.start(engine, host="127.0.0.1", port=0, static_keys=("ark-key",))

    gw = asyncio.run_coroutine_threadsafe(start(), loop).result(180)
    yield {"base_url": gw.base_url, "api_key": "ark-key", "model": gw.model_name}
    asyncio.run_coroutine_threadsafe(gw.stop(close_engine=True), loop).result(60)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
