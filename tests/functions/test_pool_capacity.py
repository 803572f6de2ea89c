"""A capacity beyond the machine is capped at load, with the numbers in the warning."""

from __future__ import annotations

import logging
import time

from conftest import WS
from rltune.functions import FunctionComponentSpec, FunctionPool
from rltune.functions.backends.local import LocalProcessBackend
from rltune.functions.pool import WORKERS_PER_CORE, machine_cores


async def test_capacity_30_is_capped_to_what_the_machine_can_start(tmp_path, caplog):
    limit = WORKERS_PER_CORE * machine_cores()
    spec = FunctionComponentSpec(classpath="functions.trivial.Trivial", func_type="reward",
                                 workspace=WS, runtime={"capacity": 30, "min_capacity": 30,
                                                        "max_capacity": 30})
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="rltune.functions.pool"):
        pool = await FunctionPool.start(spec, LocalProcessBackend(tmp_path / "logs"))
    try:
        assert len(pool.workers) == min(30, limit)
        assert pool.runtime.max_capacity == min(30, limit)
        out = await pool.call({"agent_output": {"messages": []}})
        assert out.reward.reward_score == 1.0
    finally:
        await pool.close()
    assert time.monotonic() - t0 < 60
    if limit < 30:
        text = caplog.text
        assert "capacity 30" in text and f"{machine_cores()} CPU core" in text
        assert f"capped at {limit} workers" in text
