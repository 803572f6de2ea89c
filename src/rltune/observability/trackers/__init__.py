"""Experiment tracker adapters; each imports its package only when a job names it."""
