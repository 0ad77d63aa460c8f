"""Reaching a Ray cluster for the Ray executor: where ``ray.init`` will go (resolved as Ray
resolves it), a TCP probe so an address nothing answers at fails in seconds, whether a
configured address names the cluster Ray is on, how many workers fit, and Ctrl-C around Ray's
blocking calls. Nothing here imports Ray at module level."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from faithgate.errors import InputError

PROBE_TIMEOUT_S = 5.0  # to resolve a cluster's host, and again to open a TCP connection to it
GCS_CONNECT_ATTEMPTS = "3"  # Ray's tries (~40 s each) at a GCS port that answers (default 20)
RAY_CLIENT_PORT = 10001  # Ray Client's default port (``ray://host`` without one)


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError(
            "the ray executor needs Ray: pip install 'faithgate[ray]' (or choose --executor local)"
        ) from None
    return ray


def same_cluster(address: str, connected: str) -> bool:
    """Whether a configured Ray ``address`` names the cluster whose GCS is at ``connected``
    (``host:port``): the same ``host:port``, or for a Ray Client address (``ray://head:10001``,
    another port than the GCS's) the same host."""
    scheme, _, rest = address.strip().rpartition("://")
    rest = rest.rstrip("/")
    if scheme == "ray":
        return rest.rsplit(":", 1)[0] == connected.rsplit(":", 1)[0]
    return rest == connected


def room_for(resources: Mapping[str, float], num_cpus: float, num_gpus: float, n: int) -> int:
    """How many workers of ``num_cpus`` CPUs and ``num_gpus`` GPUs fit in ``resources`` (at
    most ``n``, which is also the answer when a worker asks for nothing)."""
    room = int(resources.get("CPU", 0) // num_cpus) if num_cpus else n
    if num_gpus:
        room = min(room, int(resources.get("GPU", 0) // num_gpus))
    return min(room, n)


@dataclass(frozen=True)
class Connection:
    """Where ``ray.init(address=...)`` will go: ``kind`` is ``"local"`` (it starts a Ray),
    ``"gcs"`` (a cluster's GCS), ``"client"`` (a Ray Client server, ``ray://``) or
    ``"unknown"`` (left to Ray); ``endpoint`` the ``host:port`` it opens, ``name`` how an
    error names the cluster."""

    kind: str
    endpoint: str | None
    name: str


def resolve_connection(address: str | None) -> Connection:
    """Resolve ``address`` as ``ray.init`` will: ``$RAY_ADDRESS`` for none or ``"auto"``, then
    the cluster last started with ``ray start`` on this machine; none found (or ``"local"``): a
    local Ray. Ray's own resolver is used for GCS addresses (it maps ``localhost`` to the node's
    address as ``ray.init`` does); where it is not available the probe is skipped."""
    name = address
    env = os.environ.get("RAY_ADDRESS")
    if address in (None, "auto") and env:
        address, name = env, f"{env} ($RAY_ADDRESS)"
    if address is not None and "://" in address:
        scheme, _, rest = address.partition("://")
        host_port = rest.split("/")[0]
        if scheme != "ray" or not host_port:
            return Connection("unknown", None, str(name))
        if not split_endpoint(host_port):
            host_port = f"{host_port}:{RAY_CLIENT_PORT}"
        return Connection("client", host_port, str(name))
    try:
        from ray._private.services import canonicalize_bootstrap_address

        endpoint = canonicalize_bootstrap_address(address)
    except ConnectionError as exc:  # "auto" and no cluster running: Ray's own one line
        raise InputError(
            f"cannot connect to the Ray cluster at {name}: {str(exc).splitlines()[0]}"
        ) from None
    except Exception:  # noqa: BLE001 - a malformed address (ray.init says so), a newer Ray
        return Connection("unknown", None, str(name))
    if endpoint is None:
        return Connection("local", None, "a local Ray")
    if address is None:
        name = f"{endpoint} (the cluster last started with `ray start` here; `ray stop` forgets it)"
    return Connection("gcs", endpoint, str(name))


def split_endpoint(endpoint: str) -> tuple[str, int] | None:
    host, sep, port = endpoint.rpartition(":")
    host = host.strip("[]")  # [::1]:6379
    if not sep or not host or not port.isdigit():
        return None
    return host, int(port)


def unreachable(endpoint: str, timeout: float) -> str | None:
    """Why ``endpoint`` (``host:port``) takes no TCP connection, or ``None`` when it does (or
    is not a ``host:port``: ``ray.init`` then says what is wrong). The host name is resolved
    in a thread, so a resolver that does not answer costs ``timeout`` too, not minutes."""
    split = split_endpoint(endpoint)
    if split is None:
        return None
    host, port = split
    found: dict[str, Any] = {}

    def lookup() -> None:
        try:
            found["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            found["error"] = exc

    resolver = threading.Thread(target=lookup, name="faithgate-ray-probe", daemon=True)
    resolver.start()
    resolver.join(timeout)
    if resolver.is_alive():
        return f"the host name {host!r} did not resolve within {timeout:g} s"
    if "error" in found:
        return f"unknown host {host!r} ({found['error'].strerror or found['error']})"
    last: OSError | None = None
    for family, kind, proto, _, sockaddr in found["infos"]:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(timeout)
                sock.connect(sockaddr)
            return None
        except OSError as exc:
            last = exc
    if isinstance(last, ConnectionRefusedError):
        return "connection refused (nothing listens on that port)"
    if isinstance(last, TimeoutError):
        return f"no answer within {timeout:g} s"
    return f"no connection ({last.strerror if last and last.strerror else last})"


@contextlib.contextmanager
def env_default(name: str, value: str, when: bool) -> Iterator[None]:
    """Set the environment variable ``name`` for the block, if ``when`` and the user has not
    set it; then remove it again."""
    if not when or name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)


@contextlib.contextmanager
def sigint_as_keyboard_interrupt() -> Iterator[None]:
    """Around Ray's blocking calls (``ray.wait``, ``ray.get``): Ray turns a Ctrl-C that
    arrives while it blocks into an interruption only when the SIGINT handler raises
    ``KeyboardInterrupt``; any other exception (the CLI's ``Interrupted``) is swallowed inside
    Ray's signal check and the Ctrl-C is lost. So for the call SIGINT raises
    ``KeyboardInterrupt``, and when it does, the caller's own handler is run afterwards (the
    CLI's then raises ``Interrupted``: one line, exit 130)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous) or previous is signal.default_int_handler:
        yield  # Python's default (KeyboardInterrupt already), SIG_IGN or SIG_DFL
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, previous)
        previous(signal.SIGINT, None)  # the caller's interruption (raises)
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
