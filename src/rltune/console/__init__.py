"""rltune.console."""
