"""Prefect flows composed of tasks/ wrappers; flows own the MLflow runs."""

# Point Prefect (home, result storage, telemetry) at the artifacts root before any
# flow module imports prefect: its settings are read when it is first imported.
import trainspotter.tasks  # noqa: F401
