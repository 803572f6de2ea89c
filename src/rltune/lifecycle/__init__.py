"""After training: publish a checkpoint as a model, serve published models, evaluate, export.

* ``publish``    — copy (hard-link) a job's checkpoint into the model registry's folder.
* ``serveproc``  — one gateway process serving several published models, routed by ``model``.
* ``evaluate``   — a dataset through a model's rollout and reward functions, no training.
* ``export``     — a merged Hugging Face folder (and the LoRA adapter alone).

Nothing here imports torch at module load; the server uses these from its request handlers.
"""
