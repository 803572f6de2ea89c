"""``…reinforcement.component.server``: the cloud SDK's function-server path (``server``)."""
