"""A real gateway served from a background event loop, for tests whose clients run in other
threads or processes (the CLI, schemathesis)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def threaded_gateway(model_dir: Path, **gateway_kwargs: Any) -> Iterator[Any]:
    """The started ``Gateway`` over the built-in engine on ``model_dir`` (one thread)."""
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway import Gateway

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start():
        engine = TransformersEngine.from_pretrained(model_dir, threads=1)
        return await Gateway.start(engine, host="127.0.0.1", port=0, **gateway_kwargs)

    gw = asyncio.run_coroutine_threadsafe(start(), loop).result(180)
    try:
        yield gw
    finally:
        asyncio.run_coroutine_threadsafe(gw.stop(close_engine=True), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
