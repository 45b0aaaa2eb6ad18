"""Prefect flows: ``train`` (the full pipeline); run them from the repository root."""
