"""Prefect flows composed of tasks/ wrappers; flows own the MLflow runs."""
