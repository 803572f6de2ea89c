"""rltune.trainer.signals: what a step learns from, per advantage estimator.

* ``table``: ``SIGNALS`` (estimator -> signal), ``GroupSignal`` (GRPO, GSPO, DAPO) and
  ``TeacherSignal`` (on-policy distillation)
* ``advantages``: group advantages, reward shaping and OPD's per-token advantages (pure torch)
* ``ppo``: ``CriticSignal`` (PPO) over ``critic`` (the value model) and ``gae``
* ``teacher``: OPD's frozen teacher; ``opd_reward``: OPD with reward functions too

Importing this package imports nothing else.
"""
