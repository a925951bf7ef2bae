"""Errors that the CLI turns into one clear line and a non-zero exit."""


class InputError(ValueError):
    """Bad user input: the message names the file, the line/row and the problem."""
