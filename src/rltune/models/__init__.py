"""rltune.models."""
