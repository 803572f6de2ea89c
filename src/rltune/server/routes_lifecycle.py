"""The routers of the model lifecycle (models, deployments, evaluations)."""

from rltune.server import routes_deployments, routes_evaluations, routes_models

MODULES = (routes_models, routes_deployments, routes_evaluations)
