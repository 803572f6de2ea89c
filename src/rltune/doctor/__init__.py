"""rltune.doctor: live diagnosis of a training job from its step metrics (torch-free).

``detectors`` are pure functions over the step metrics (thresholds in
``rltune.config.advisor``), ``advisor`` runs them after each step and writes ``alerts.jsonl``
(``alerts``), ``plan`` estimates a job before it runs. See docs/doctor.md.
"""

from rltune.doctor.advisor import Advisor, diagnose, rollout_features
from rltune.doctor.alerts import Alert, append_alert, read_alerts
from rltune.doctor.detectors import DETECTORS

__all__ = ["DETECTORS", "Advisor", "Alert", "append_alert", "diagnose",
           "read_alerts", "rollout_features"]
