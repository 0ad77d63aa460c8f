"""The files of a pytest run that the gate's reports must never replace.

``pytest --faithgate`` writes its reports and, with ``--faithgate-update-baseline``, the
baseline at the end of the session. Before that, ``plugin.check_paths`` refuses any of them
that would replace an input of the gate; this module refuses those that would replace a file of
the pytest run itself (a test module, a conftest, pytest's ini file, a collected test file).
Both ``plugin`` and ``gate_plugin`` (the controller that writes the reports) read it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from faithgate.errors import FaithgateError, InputError
from pytest_faithgate.messages import plugin_line
from pytest_faithgate.session import PluginSession


def gate_writes(session: PluginSession) -> list[tuple[str, Any]]:
    """The files ``pytest --faithgate`` writes at the end of the session: the gate's reports
    and the baseline it updates, as ``(what, path)``."""
    from faithgate.gate import output_files

    opts = session.options
    return [
        (f"faithgate {what}" if what.endswith(" report") else what, path)
        for what, path in output_files(session.gate_config, update_baseline=opts.update_baseline)
    ]


# The files pytest reads its configuration from (``_pytest.config.findpaths``).
PYTEST_CONFIG_NAMES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def ini_files(config: pytest.Config) -> list[tuple[str, Path]]:
    """The files of the pytest run itself known before collection: the ini file in use
    (``-c`` may give it any name) and those of the rootdir."""
    files = [("pytest configuration file", config.rootpath / name) for name in PYTEST_CONFIG_NAMES]
    if config.inipath is not None:
        files.append(("pytest configuration file", Path(config.inipath)))
    return files


def refuse_overwriting_pytest_files(
    writes: list[tuple[str, Any]], files: list[tuple[str, Path]]
) -> None:
    """Raise ``InputError`` when a file the gate writes already exists and is a file of the
    pytest run (``files``: its configuration, the collected test files), a Python module (a
    test module or conftest pytest imports, or any other source: never a report) or a file
    pytest takes its configuration from (``PYTEST_CONFIG_NAMES``): the report would replace
    it. A path that exists as an earlier report (``report.md``) is still written over."""
    from faithgate.safety.paths import same_file

    for what, path in writes:
        if path is None or str(path) == "-":
            continue
        target = Path(path)
        if not target.is_file():  # not there yet (or not a file: refused elsewhere)
            continue
        resolved = target.resolve()
        role = None
        if resolved.suffix == ".py":
            role = "a Python module"
        elif resolved.name in PYTEST_CONFIG_NAMES:
            role = "a project configuration file"
        for file_what, file_path in files:
            if role is None and same_file(target, file_path):
                role = f"the {file_what} of this run"
        if role is not None:
            raise InputError(
                f"the {what} ({path}) is {role}; refusing to overwrite it: choose another path"
            )


def check_collected_files(session: PluginSession, items: list[Any]) -> None:
    """After collection, before any test runs: a usage error when a file the gate writes is a
    collected test file of another kind than a Python module (a doctest text file, a file a
    plugin collects), which ``check_paths`` could not know yet."""
    writes = [(what, p) for what, p in gate_writes(session) if p is not None and Path(p).is_file()]
    if not writes:
        return
    files: dict[Path, None] = {}
    for item in items:
        for node in item.listchain():
            if isinstance(node, pytest.File):
                files[Path(node.path)] = None
    try:
        refuse_overwriting_pytest_files(writes, [("collected test file", p) for p in files])
    except FaithgateError as exc:
        raise pytest.UsageError(f"faithgate: {plugin_line(exc)}") from None
