"""A `trainspotter serve` app on loopback in a background thread, with a bounded lifetime."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest

API_KEY = "sk-test-SECRET-12345"  # the fake key the API tests put in the environment


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_server(spec: str = "testbed:mini", fail_rate: float = 0.0, seed: int = 0,
                   fail_sleep: float = 1.0, lifetime: float = 300.0, **quirks):
    """Yield (app, base_url); the server stops on exit or after `lifetime` seconds.
    ``quirks``: fields of ``serve.Quirks`` (a server that differs from the reference)."""
    import uvicorn

    from trainspotter.backends import load_backend
    from trainspotter.backends.serve import Quirks, create_app

    app = create_app(load_backend(spec), "mini", fail_rate=fail_rate, seed=seed, fail_sleep=fail_sleep,
                     quirks=Quirks(**quirks))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical",
                                           timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    timer = threading.Timer(lifetime, lambda: setattr(server, "should_exit", True))
    timer.daemon = True
    timer.start()
    deadline = time.time() + 30
    while not server.started:
        if time.time() > deadline or not thread.is_alive():
            raise RuntimeError("test server did not start")
        time.sleep(0.05)
    try:
        yield app, f"http://127.0.0.1:{port}/v1"
    finally:
        timer.cancel()
        server.should_exit = True
        thread.join(10)


@contextlib.contextmanager
def llama_cpp_server(python: str, gguf, port: int | None = None):
    """Yield the base URL of llama-cpp-python's OpenAI-compatible server (run by ``python``)
    serving ``gguf`` with --logits_all true (echo log-probs need every position's logits)."""
    import subprocess

    import httpx

    port = port or free_port()
    proc = subprocess.Popen([python, "-m", "llama_cpp.server", "--model", str(gguf), "--logits_all", "true",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 120
        while True:
            try:
                httpx.get(f"{url}/models", timeout=1)
                break
            except httpx.HTTPError:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"llama_cpp.server (by {python}) did not start") from None
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def server(mini_testbed):
    with running_server() as s:
        yield s


@pytest.fixture(scope="session")
def start_server():
    """The `running_server` context manager, for tests that need their own server."""
    return running_server


@pytest.fixture(autouse=True)
def key_stored_nowhere(request, artifacts, secret_scan):
    """After every API test: the key is in no file under the artifacts folder (nor under the
    test's tmp_path, where some tests keep their query cache or artifacts)."""
    # tmp_path is requested here, at setup, so that it is torn down after this check
    roots = [artifacts] + ([request.getfixturevalue("tmp_path")] if "tmp_path" in request.fixturenames else [])
    yield
    keys = {API_KEY, getattr(request.module, "SECRET", API_KEY)}
    hits = [str(p) for root in roots for key in keys for p in secret_scan(root, key)]
    assert not hits, f"API key found in {hits}"
