"""The ``--executor`` / ``--address`` / ``--num-workers`` options shared by ``check``,
``bench`` and ``calibrate``; choices come from ``faithgate.execution.EXECUTOR_CHOICES``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from faithgate.execution import EXECUTOR_CHOICES, ExecutionSettings


def execution_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add the executor options (keyword arguments ``executor``, ``address``, ``num_workers``)."""
    fn = click.option(
        "--num-workers",
        type=click.IntRange(min=1),
        metavar="N",
        help="ray: number of worker actors (default: as many as the cluster's free CPUs allow)",
    )(fn)
    fn = click.option(
        "--address",
        metavar="ADDR",
        help="ray: cluster address: auto, ray://HOST:10001 or HOST:PORT "
        "(default: $RAY_ADDRESS, else a local Ray started for this run)",
    )(fn)
    fn = click.option(
        "--executor",
        type=click.Choice(EXECUTOR_CHOICES),
        help="where scoring runs: local (this process) or ray (a Ray cluster; faithgate[ray])",
    )(fn)
    return fn


def execution_overrides(
    executor: str | None, address: str | None, num_workers: int | None
) -> dict[str, Any] | None:
    """The ``execution`` override for ``GateConfig.override`` (``None`` when no flag given)."""
    changes = {"executor": executor, "address": address, "num_workers": num_workers}
    return {k: v for k, v in changes.items() if v is not None} or None


def execution_settings(
    executor: str | None, address: str | None, num_workers: int | None
) -> ExecutionSettings:
    """Settings for commands without a gate configuration (``bench``, ``calibrate``)."""
    return ExecutionSettings().with_overrides(
        execution_overrides(executor, address, num_workers) or {}, "option"
    )
