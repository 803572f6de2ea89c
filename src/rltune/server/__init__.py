"""rltune.server."""
