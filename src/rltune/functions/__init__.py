"""The function runtime: workers serving user processors, an autoscaled pool, packaging, registry.

Trainer-facing API::

    pool = await FunctionPool.start(FunctionComponentSpec(classpath=..., func_type="reward",
                                                          workspace=..., timeout=120))
    out = await pool.call(reward_input)      # never raises for user failures
    pool.metrics(); await pool.close()
"""

from rltune.functions.metrics import PoolMetrics
from rltune.functions.pool import FunctionPool
from rltune.functions.spec import FunctionComponentRuntime, FunctionComponentSpec

__all__ = ["FunctionComponentRuntime", "FunctionComponentSpec", "FunctionPool", "PoolMetrics"]
