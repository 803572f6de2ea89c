"""The compatibility boundary: foreign shapes turned into rltune's job config before it is
validated. TRL's and verl's hyper-parameter names (``synonyms``, ``synonym_kinds``,
``trl_names``, ``verl_names``), verl's YAML and launch lines (``foreign``), verl / TRL / HF
dataset rows (``rowshapes``, ``convert``), and Volcano Ark's job.yaml (``ark_job``,
``ark_data``, ``ark_source``). The core schema (``config/job.py``, ``config/hyperparams.py``)
calls these before its own checks.
"""
