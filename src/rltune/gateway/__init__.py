"""rltune.gateway."""
