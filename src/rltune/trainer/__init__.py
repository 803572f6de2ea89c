"""rltune.trainer."""
