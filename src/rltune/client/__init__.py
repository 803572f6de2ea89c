"""rltune.client."""
