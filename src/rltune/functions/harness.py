"""Single mode of ``rltune test-functions``: one input through one function.

The input runs through a classpath (a one-worker pool) or a loaded instance's URL. The dataset
mode (rollouts and their rewards over a dataset) scores like training does and lives in
``rltune.rollout.harness``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from rltune.functions.pool import FunctionPool
from rltune.functions.spec import FunctionComponentSpec
from rltune.sdk.data import FunctionType


async def run_single(input_data: dict[str, Any], *, classpath: Optional[str] = None,
                     func_type: str | FunctionType | None = None, workspace: str | Path = ".",
                     instance_url: Optional[str] = None,
                     timeout: Optional[float] = None,
                     headers: Optional[dict[str, str]] = None) -> Any:
    """Run one input through a classpath (a one-worker pool) or a loaded instance's URL
    (sent with ``headers``: a guarded instance's token).

    Returns the validated output model (status FAILED with the error on failure).
    """
    from rltune.sdk.data import OUTPUT_MODELS

    ftype = FunctionType(func_type or input_data.get("func_type") or "rollout")
    if instance_url:
        import httpx

        url = instance_url.rstrip("/")
        url = url if url.endswith("/api/v1") else f"{url}/api/v1"
        async with httpx.AsyncClient(timeout=timeout) as client:
            resp = await client.post(url, json=input_data, headers=headers)
        if resp.status_code != 200:
            from rltune.functions.failures import failed_output

            return failed_output(ftype, f"instance answered {resp.status_code}: {resp.text}",
                                 code="bad_request")
        return OUTPUT_MODELS[ftype].model_validate(resp.json())
    assert classpath, "give a classpath or an instance url"
    spec = FunctionComponentSpec(classpath=classpath, func_type=ftype, workspace=workspace,
                                 timeout=timeout, max_retries=0)
    async with await FunctionPool.start(spec) as pool:
        return await pool.call(input_data)
