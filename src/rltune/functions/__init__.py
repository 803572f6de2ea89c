"""rltune.functions."""
