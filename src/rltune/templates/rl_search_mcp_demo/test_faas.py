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
from plugins.answer_grader import contains_answer
from plugins.rollout import search_rollout

if __name__ == "__main__":
    LOCAL_TEST_MODEL = os.environ.get("LOCAL_TEST_MODEL", "nano")
    ARK_API_KEY = os.environ.get("ARK_API_KEY", "EMPTY")
    ARK_BASE_URL = os.environ.get("ARK_BASE_URL", "http://127.0.0.1:8000/v1")
    data = Path(__file__).resolve().parent / "data" / "search_dataset_dev_100.jsonl"
    sample = {**json.loads(data.read_text().splitlines()[0]), "model": LOCAL_TEST_MODEL}
    context = {"phase": "test"}

    rollout = get_or_create_pipeline_plugin_test_instance(search_rollout)
    grader = get_or_create_pipeline_plugin_test_instance(contains_answer)
    try:
        out = rollout.request({"context": context, "sample": sample,
                               "proxy": {"url": ARK_BASE_URL, "jwt_token": ARK_API_KEY}},
                              sync=True)
        print("rollout:", json.dumps(out, ensure_ascii=False))
        if out["status"] == "success":
            graded = grader.request({"context": context, "sample": sample,
                                     "trajectory": out["trajectory"]})
            print("contains_answer:", json.dumps(graded))
    finally:
        rollout.stop()
        grader.stop()
