"""The routers of the model lifecycle (models, deployments, evaluations)."""

from rltune.server.routes import deployments as routes_deployments
from rltune.server.routes import evaluations as routes_evaluations
from rltune.server.routes import models as routes_models

MODULES = (routes_models, routes_deployments, routes_evaluations)
