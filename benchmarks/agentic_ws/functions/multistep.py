"""The multi-step calculator agent of ``agentic_compare.py --task multistep`` (rltune's side).

The ``multistep`` template's agent (``rltune/templates/multistep/functions/rollout.py``: a model
turn, then that turn's ``calculator`` calls, until a plain answer or ``MAX_TURNS`` model calls)
with the calc benchmark's remote calculator (``http_tool.py``: the HTTP service at
``$TOOL_URL``, its latency and failures; a failed call is a tool error the model reads). Only
the turn budget differs from ``HttpToolRollout``: a chain of up to 4 dependent calls, then the
answer. The reward is the template's own (``functions/reward.py:MultiStepReward``, copied
into the job's workspace with the template).
"""

from __future__ import annotations

from functions.http_tool import HttpToolRollout
from rltune.templates.multistep.functions.rollout import MAX_TURNS


class MultiStepHttpRollout(HttpToolRollout):
    max_turns = MAX_TURNS
