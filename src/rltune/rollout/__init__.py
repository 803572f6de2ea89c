"""rltune.rollout: the one path from prompts to scored groups (torch-free).

* ``results``: ``RolloutResult`` (what one rollout produced) and ``has_signal`` (does a
  prompt's group carry a learning signal?), ``trajectory_record`` (the stored record)
* ``runner``: ``RolloutRunner`` runs one rollout attempt end to end, with retries
* ``scoring`` / ``rewarder``: the reward rules (docs/design.md) and ``Rewarder``, which scores
  a group with every reward and group-reward component
* ``groups``: ``run_group``, n rollouts of one prompt, scored together
* ``harness``: ``rltune test-functions`` over a dataset, through the same path

Training (``trainer/step.py``), validation, evaluation (``lifecycle/evaluate.py``) and
``rltune test-functions`` all score through ``run_group``, so they cannot disagree.
It sits above ``functions``, ``gateway`` and ``observability`` and below ``trainer``.
"""
