"""The release gate: one engine for every entry point (``faithgate check``, ``pytest
--faithgate``, the Action)::

    from faithgate import Gate, load_config
    from faithgate.report import write_reports
    config = load_config()                # [tool.faithgate] / faithgate.toml
    result = Gate(config).run()           # checks, loads outputs, scores (cached), evaluates
    write_reports(result, config.reports) # JUnit / Markdown / JSON / HTML as configured
    raise SystemExit(0 if result.passed else 1)

Modules, top down: ``run`` (``Gate``), ``checks`` | ``evaluate`` (pure rules) | ``last_result``,
``baseline`` (its policy, matching, the regression rule), ``pairs``.
"""

from __future__ import annotations

from faithgate.gate.baseline import BaselinePolicy
from faithgate.gate.checks import Checks, check_config, input_files, output_files
from faithgate.gate.run import Gate
from faithgate.result import GateResult

__all__ = [
    "BaselinePolicy",
    "Checks",
    "Gate",
    "GateResult",
    "check_config",
    "input_files",
    "output_files",
]
