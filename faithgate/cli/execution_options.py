"""The ``--executor`` / ``--address`` / ``--num-workers`` options shared by ``check``,
``bench`` and ``calibrate``; choices come from the executor registry
(``faithgate.scoring.execution.EXECUTORS``), and a flag applies to the executors whose options take its
key. Flags override ``[tool.faithgate.execution]`` of the configuration, for all three."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from faithgate.errors import ConfigError
from faithgate.scoring.execution import (
    EXECUTOR_CHOICES,
    ExecutionSettings,
    executors_help,
    executors_taking,
)


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
        help=f"where scoring runs: {executors_help()}",
    )(fn)
    return fn


def execution_overrides(
    executor: str | None, address: str | None, num_workers: int | None
) -> dict[str, Any] | None:
    """The ``execution`` override for ``GateConfig.override`` (``None`` when no flag given)."""
    changes = {"executor": executor, "address": address, "num_workers": num_workers}
    return {k: v for k, v in changes.items() if v is not None} or None


def refuse_foreign_flags(
    settings: ExecutionSettings, address: str | None, num_workers: int | None
) -> None:
    """``--address`` / ``--num-workers`` where the run's executor (flags over the
    configuration) takes no such option (the ray one does) would change nothing: a usage
    error the user should hear of."""
    flags = (("--address", "address", address), ("--num-workers", "num_workers", num_workers))
    given = [(flag, key) for flag, key, value in flags if value is not None]
    if not given:
        return
    takers = executors_taking(*(key for _, key in given))
    if settings.executor not in takers:
        flags_given = " and ".join(flag for flag, _ in given)
        owner = takers[0] if takers else "another"
        raise ConfigError(
            f"{flags_given} only appl{'y' if len(given) > 1 else 'ies'} to the {owner} "
            f"executor, and this run's is {settings.executor}: add --executor {owner} (or set "
            f'execution.executor = "{owner}")'
        )


def execution_settings(
    executor: str | None,
    address: str | None,
    num_workers: int | None,
    config_path: str | Path | None = None,
) -> ExecutionSettings:
    """Settings for ``bench`` and ``calibrate``: the ``[tool.faithgate.execution]`` table of
    the configuration (``config_path``, else the one ``faithgate check`` would find from the
    current directory; none: the defaults), with the flags applied over it. A configuration
    that does not parse is an error here too (exit 2), not silently ignored."""
    from faithgate.config import load_config

    path = Path(config_path) if config_path else None
    if path is not None and path.is_file() and path.name != "pyproject.toml":
        base = load_config(path).execution
    else:
        # A pyproject.toml is only a configuration with a [tool.faithgate] table: search
        # from its directory as `check` does (a missing --config file is yet to be written).
        start = path.parent if path is not None else None
        base = load_config(start=start).execution
    settings = base.with_overrides(
        execution_overrides(executor, address, num_workers) or {}, "option"
    )
    refuse_foreign_flags(settings, address, num_workers)
    return settings
