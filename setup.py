"""The packages, found rather than listed (every other setting is in pyproject.toml): the library under
src/, and flows/ and tasks/ installed inside it as trainspotter.flows and trainspotter.tasks
(tests/unit/test_wheel.py builds the wheel and runs it from a fresh virtual environment)."""

from setuptools import find_packages, setup


def inside(folder: str, package: str) -> list[str]:
    """``folder``'s package and its subpackages, named under ``package``."""
    return [package, *(f"{package}.{sub}" for sub in find_packages(folder))]


setup(packages=find_packages("src") + inside("flows", "trainspotter.flows") + inside("tasks", "trainspotter.tasks"))
