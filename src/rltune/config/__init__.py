"""rltune.config."""
