"""Starting the Ray executor: an address that takes no connection fails in seconds with one
line and exit 2 (Ray itself retries for ~14 minutes), and a local Ray that faithgate starts for
the run gets no more workers than it has room for (the others could never start)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

ray = pytest.importorskip("ray", reason="the Ray executor needs faithgate[ray]")

import ray_helpers  # noqa: E402
from ray_helpers import (  # noqa: E402
    PoisonMetric,
    as_data,
    fails_after,
    patient_ray_start,
    poison_examples,
    start_with_retries,
)

from faithgate.cli import cli  # noqa: E402
from faithgate.scoring.execution import ExecutionSettings, LocalExecutor, ScorerRecipe  # noqa: E402
from faithgate.scoring.ray_executor import RayExecutor  # noqa: E402

FAST_S = 30  # the probe: 5 s to resolve, 5 s to connect


def _closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    ("address", "via_env"),
    [
        ("127.0.0.1:{port}", False),
        ("127.0.0.1:{port}", True),  # $RAY_ADDRESS, no --address
        ("ray://127.0.0.1:{port}", False),  # Ray Client
        ("faithgate-no-such-host.invalid:6379", False),
    ],
    ids=["closed-port", "RAY_ADDRESS", "ray-client", "unknown-host"],
)
def test_unreachable_address_fails_in_seconds_with_one_line(
    address: str, via_env: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``faithgate check`` in this process (click's runner on the CLI's own command, which
    gives the console script's exit code and stderr line): Ray is imported here already."""
    address = address.format(port=_closed_port())
    (tmp_path / "outputs.jsonl").write_text(
        '{"id": "a", "source": "The cat sat on the mat.", "summary": "The cat sat."}\n',
        encoding="utf-8",
    )
    (tmp_path / "faithgate.toml").write_text(
        'metrics = ["overlap"]\noutputs = "outputs.jsonl"\n[thresholds]\noverlap = 0.1\n',
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    assert not ray.is_initialized()  # else the executor would not connect at all
    env: dict[str, str | None] = {"RAY_ADDRESS": None}
    args = ["check", "--executor", "ray"]
    if via_env:
        env["RAY_ADDRESS"] = address
    else:
        args += ["--address", address]
    t0 = time.monotonic()
    # Without the probe this takes ~14 minutes (Ray's 20 tries of ~40 s): the limit fails it.
    with fails_after(90):
        result = CliRunner().invoke(cli, args, env=env, catch_exceptions=False)
    took = time.monotonic() - t0
    assert result.exit_code == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    name = f"{address} ($RAY_ADDRESS)" if via_env else address
    assert line.startswith(f"faithgate: cannot connect to the Ray cluster at {name}: "), line
    reason = "unknown host" if "invalid" in address else "connection refused"
    assert reason in line, line
    assert result.stdout == "" and took < FAST_S, took


@pytest.mark.xdist_group("ray")  # starts a Ray of its own: one Ray at a time
def test_a_local_ray_gets_no_more_workers_than_it_has_room_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two workers asked for, each needing more than half the machine's CPUs: the Ray started
    for the run (``address = "local"``) has room for one, and nothing will ever add more, so
    the pool is one worker (with a warning) and the run completes, as locally."""
    assert not ray.is_initialized()
    patient_ray_start()
    cpus = ray._private.utils.get_num_cpus()  # what the local Ray will have
    examples = [e for e in poison_examples() if e.id not in ("c1", "p1")]
    recipe = ScorerRecipe((PoisonMetric(),))
    want = as_data(LocalExecutor(recipe).score(examples))
    settings = ExecutionSettings(
        executor="ray", address="local", num_workers=2, num_cpus=cpus // 2 + 1, batch_size=2
    )
    ex = RayExecutor(recipe, settings)
    ray.cloudpickle.register_pickle_by_value(ray_helpers)
    try:
        start_with_retries(ex.start, ex.close)
        assert len(ex.actors) == 1
        assert "execution.num_workers = 2, but the local Ray started for this run has room " in (
            caplog.text
        )
        assert "using 1 worker(s)" in caplog.text
        with fails_after(60):
            got = ex.score(examples)
    finally:
        ex.close()
        ray.cloudpickle.unregister_pickle_by_value(ray_helpers)
    assert as_data(got) == want
    assert not ray.is_initialized()  # it started that Ray, so it stopped it
