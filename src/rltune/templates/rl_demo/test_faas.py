"""Online test of the plugins (Ark's ``test_faas.py``): each plugin is registered with the
rltune server, loaded as a function instance (worker processes in the server, as a job runs
them) and called once with Ark's request shape. Run it from the workspace folder::

    python -m rltune.ark test_faas.py

The server is the one ``rltune ark login`` saved (else ``RLTUNE_BASE_URL``, else the local
server). The rollout's model is ``LOCAL_TEST_MODEL`` at ``ARK_BASE_URL`` (default
``http://127.0.0.1:8000/v1``: ``rltune serve nano``) with the key ``ARK_API_KEY``.
"""

import json
import os
from pathlib import Path

from ark_sdk.resources.pipeline_plugin.test_instance import (
    get_or_create_pipeline_plugin_test_instance,
)
from plugins.answered_grader import answered_grader
from plugins.calc_rollout import calc_rollout
from plugins.exact_grader import exact_grader

if __name__ == "__main__":
    LOCAL_TEST_MODEL = os.environ.get("LOCAL_TEST_MODEL", "nano")
    ARK_API_KEY = os.environ.get("ARK_API_KEY", "EMPTY")
    ARK_BASE_URL = os.environ.get("ARK_BASE_URL", "http://127.0.0.1:8000/v1")
    rows = (Path(__file__).resolve().parent / "data" / "val.jsonl").read_text().splitlines()
    sample = {**json.loads(rows[0]), "model": LOCAL_TEST_MODEL}
    context = {"phase": "test"}

    rollout = get_or_create_pipeline_plugin_test_instance(calc_rollout)
    exact = get_or_create_pipeline_plugin_test_instance(exact_grader)
    answered = get_or_create_pipeline_plugin_test_instance(answered_grader)
    try:
        out = rollout.request({"context": context, "sample": sample,
                               "proxy": {"url": ARK_BASE_URL, "jwt_token": ARK_API_KEY}},
                              sync=True)
        print("rollout:", json.dumps(out, ensure_ascii=False))
        if out["status"] == "success":
            graded = exact.request({"context": context, "sample": sample,
                                    "trajectory": out["trajectory"]})
            print("exact_grader:", json.dumps(graded))
            group = answered.request({"context": context, "sample": sample,
                                      "trajectories": [out["trajectory"]]})
            print("answered_grader:", json.dumps(group))
    finally:
        for instance in (rollout, exact, answered):
            instance.stop()
