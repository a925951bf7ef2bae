"""Failures of requests to an OpenAI-compatible server, one type for each thing the
backend decides on (the probe reads types and HTTP statuses, never message text)."""

from __future__ import annotations

from trainspotter.errors import APIRequestError


class MalformedResponse(APIRequestError):
    """The server answered 200 with a body that is not a valid completion (retried)."""


class Unsupported(APIRequestError):
    """The server rejected or ignored a feature (``echo``, ``logprobs``, a list prompt)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status

    @property
    def endpoint_missing(self) -> bool:
        """HTTP 404/405: no such endpoint, so no mode that uses it will work."""
        return self.status in (404, 405)


class ListRefused(Unsupported):
    """The server refused a request with a list of prompts (HTTP 4xx)."""


class LogprobsIgnored(Unsupported):
    """Answered (200) without the log-probs asked for: no top-k will bring them."""


class EchoIgnored(Unsupported):
    """``echo`` answered without log-probs for the prompt: no echo mode will work."""


class Incompatible(APIRequestError):
    """No mode works against this server: deterministic, so not worth retrying."""


def transient(err: Exception) -> bool:
    """A fault worth retrying: a dropped connection or timeout, 429, 5xx, a malformed body."""
    import openai

    if isinstance(err, (openai.APIConnectionError, MalformedResponse)):  # incl. timeouts, drops
        return True
    return isinstance(err, openai.APIStatusError) and (err.status_code == 429 or err.status_code >= 500)


def describe_error(err: Exception) -> str:
    """Type and status of an error, never request headers (the key lives there)."""
    status = getattr(err, "status_code", None)
    return f"{type(err).__name__}{f' (HTTP {status})' if status else ''}: {str(err)[:200]}"
