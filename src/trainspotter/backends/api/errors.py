"""Failures of requests to an OpenAI-compatible server, one type for each thing the
backend decides on (the probe reads types and HTTP statuses, never message text)."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

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


class Unreachable(APIRequestError):
    """The server could not be reached on first contact (connection refused, no such host):
    no retry will change that, so none is made."""


class Incompatible(APIRequestError):
    """No mode works against this server: deterministic, so not worth retrying."""


def transient(err: Exception) -> bool:
    """A fault worth retrying: a dropped connection or timeout, 429, 5xx, a malformed body."""
    import openai

    if isinstance(err, (openai.APIConnectionError, MalformedResponse)):  # incl. timeouts, drops
        return True
    return isinstance(err, openai.APIStatusError) and (err.status_code == 429 or err.status_code >= 500)


def connect_failure(err: BaseException) -> str | None:
    """Why a connection was never made (connection refused, a host name that does not
    resolve), or None: a timeout, a dropped connection or an answer is not a failure to
    connect. Read from the chain of causes (openai -> httpx -> httpcore -> OSError)."""
    import openai

    if isinstance(err, openai.APITimeoutError) or not isinstance(err, (openai.APIConnectionError, OSError)):
        return None
    cause, seen = err, 0
    while cause is not None and seen < 8:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused (nothing listens at that address and port)"
        if isinstance(cause, socket.gaierror):
            return f"the host name does not resolve ({cause.strerror or cause})"
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return None


def unreachable(base_url: str, model: str, why: str) -> Unreachable:
    return Unreachable(f"cannot reach the server {base_url} (model {model!r}): {why}; is the server "
                       f"running, and is the URL in the model spec right?")


def check_reachable(base_url: str, model: str, timeout: float = 5.0) -> None:
    """Before any flow starts (the CLI): one TCP connection to the server's host and port,
    no HTTP request (nothing is counted or billed). Raises ``Unreachable`` when the
    connection is refused or the host name does not resolve; a timeout is left to the
    requests' own retries."""
    url = urlsplit(base_url)
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        raise Unreachable(f"cannot reach the server {base_url} (model {model!r}): bad port") from None
    try:
        socket.create_connection((url.hostname or "", port), timeout=timeout).close()
    except OSError as err:
        if why := connect_failure(err):
            raise unreachable(base_url, model, why) from None


def describe_error(err: Exception) -> str:
    """Type and status of an error, never request headers (the key lives there)."""
    status = getattr(err, "status_code", None)
    return f"{type(err).__name__}{f' (HTTP {status})' if status else ''}: {str(err)[:200]}"
