"""rltune.cli."""
