"""rltune.engine."""
