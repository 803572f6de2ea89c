"""rltune.server.routes: the job server's REST routers, one module per resource (each has a
``router`` that ``server/app.py`` includes; ``lifecycle.MODULES``: models, deployments and
evaluations)."""
