"""Check the off-policy correction's inputs against the weights that really sampled (issue 31).

``install()`` wraps the trainer for one process: every weight sync keeps a copy of the weights
under the engine's new version (version 0: the weights the first update starts from), and
every update first recomputes, for each sampled token, its log-prob under the weights of the
version the token is tagged with (``TokenSequence.token_versions``). Per step it records:

* ``engine_err_mean`` / ``engine_err_max``: |engine log-prob - recomputed under the tagged
  version| (0 up to float noise when the tags and the engine's log-probs are right);
* ``kl_behav_tagged``: the k1 KL of the same two (the engine vs its own tagged weights);
* ``kl_tagged_prox``: k1 KL(tagged version || the policy the update starts from): the drift the
  behaviour weight corrects, from staleness alone;
* ``age_hist``: sampled tokens per age in versions (policy version - tagged version);
* ``share_ratio_beyond_x2`` / ``_x4``: share of sampled tokens whose probability under the
  policy the update starts from and under the engine differ by more than 2x / 4x.

Used by ``staleness_sweep.py --check-versions``; costs one extra forward pass of the batch per
weight version in it.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any

RECORDS: list[dict[str, Any]] = []


def _snapshot(model: Any) -> dict[str, Any]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def step_record(updater: Any, rows: list[Any], snaps: dict[int, Any], scratch: Any
                ) -> dict[str, Any]:
    """The per-step figures above for ``rows`` (``TrainingRow`` with ``meta['result']``)."""
    policy_version = max(snaps)
    prox = updater.compute_logprobs(rows)
    by_version: dict[int, list[int]] = {}
    versions = []
    for i, r in enumerate(rows):
        seq = r.meta["result"].sequences[r.meta["row"]]
        tv = seq.token_versions[: len(r.input_ids)]
        versions.append(tv)
        for v in {x for x, m in zip(tv, r.loss_mask, strict=True) if m}:
            by_version.setdefault(v, []).append(i)
    tagged: dict[tuple[int, int], list[float]] = {}
    missing = 0
    for v, idx in by_version.items():
        if v not in snaps:
            missing += len(idx)
            continue
        scratch.load_state_dict(snaps[v])
        for i, lp in zip(idx, updater.compute_logprobs([rows[i] for i in idx], scratch),
                         strict=True):
            tagged[(i, v)] = lp
    n, err_sum, err_max, kl_bt, kl_tp = 0, 0.0, 0.0, 0.0, 0.0
    far = {2: 0, 4: 0}  # tokens whose prox / behaviour probability ratio is beyond x2, x4
    ages: dict[int, int] = {}
    for i, r in enumerate(rows):
        for t, m in enumerate(r.loss_mask):
            v = versions[i][t]
            if not m or (i, v) not in tagged:
                continue
            behav, at_v, p = r.rollout_logprobs[t], tagged[(i, v)][t], prox[i][t]
            err = abs(behav - at_v)
            n, err_sum, err_max = n + 1, err_sum + err, max(err_max, err)
            kl_bt += behav - at_v
            kl_tp += at_v - p
            ages[policy_version - v] = ages.get(policy_version - v, 0) + 1
            for k in far:
                far[k] += abs(p - behav) > math.log(k)
    d = max(n, 1)
    return {"step": updater.step + 1, "policy_version": policy_version, "tokens": n,
            "rows_without_snapshot": missing, "engine_err_mean": err_sum / d,
            "engine_err_max": err_max, "kl_behav_tagged": kl_bt / d,
            "kl_tagged_prox": kl_tp / d, "age_hist": dict(sorted(ages.items())),
            **{f"share_ratio_beyond_x{k}": c / d for k, c in far.items()}}


def install(update_delay_s: float = 0.0) -> None:
    """Wrap ``PolicyUpdater.update`` and ``TrainingRuntime.sync_weights`` (see the module
    docstring); ``update_delay_s`` also sleeps that long before each update."""
    from rltune.trainer.runtime import TrainingRuntime
    from rltune.trainer.update import PolicyUpdater

    plain_update, plain_sync = PolicyUpdater.update, TrainingRuntime.sync_weights
    state: dict[str, Any] = {}

    async def sync_weights(self: Any) -> None:
        await plain_sync(self)
        state["snaps"][self.engine.weight_version] = _snapshot(self.model)

    def update(self: Any, rows: Any) -> Any:
        if update_delay_s:
            time.sleep(update_delay_s)
        if state.get("owner") is not self:  # a new run: its weights are version 0
            state.update(owner=self, snaps={0: _snapshot(self.model)},
                         scratch=copy.deepcopy(self.model))
        RECORDS.append(step_record(self, list(rows), state["snaps"], state["scratch"]))
        return plain_update(self, rows)

    PolicyUpdater.update = update  # type: ignore[method-assign]
    TrainingRuntime.sync_weights = sync_weights  # type: ignore[method-assign]
