"""Errors that the CLI turns into one clear line and a non-zero exit."""


class InputError(ValueError):
    """Bad user input: the message names the file, the line/row and the problem."""


class FieldError(InputError):
    """A config check on several fields (a model validator) that names the ``field`` to change:
    the CLI names the option that sets it (``flows.cli.common.input_error``)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class BudgetExhausted(RuntimeError):
    """A query budget (requests, tokens or money) would be exceeded by the next request.

    Raised *before* the request is sent, so nothing is spent beyond the limit; answers
    already received stay in the query cache and a rerun with a larger budget resumes.
    """


class APIRequestError(RuntimeError):
    """An API request failed for good (retries spent, or the server rejected it); the
    message names the request and the last error, never the key."""
