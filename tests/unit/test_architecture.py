"""The import contracts of pyproject's ``[tool.importlinter]`` (layers, no cycles) hold, no
test module skips itself whole on torch, and the public API imports and is listed in docs/architecture.md.
That page's layers table is the layers contract, and its layout block names every module.

``make test`` runs ``lint-imports`` before the suite; this test keeps the check in a plain
``pytest`` run too, so a layer violation shows where developers look first.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept():
    pytest.importorskip("importlinter.cli", reason="import-linter is a dev dependency")
    # In a subprocess: import-linter configures logging with dictConfig, which disables every
    # logger already created in the calling process (faithgate's own included), so run in
    # process it silenced the CLI's warnings for the rest of a test worker's session.
    code = (
        "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports("
        f"config_filename={str(ROOT / 'pyproject.toml')!r}, no_cache=True))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


TORCH_STACK = {"torch", "transformers", "optimum"}


def _module_level_skips(tree: ast.Module) -> list[tuple[int, str]]:
    """``pytest.importorskip("<torch stack>...")`` calls in statements at module level (not in a
    function or class body, where they skip one test or fixture)."""
    found = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "importorskip"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and str(node.args[0].value).split(".")[0] in TORCH_STACK
            ):
                found.append((node.lineno, node.args[0].value))
    return found


def test_module_level_skip_finder_sees_what_it_must() -> None:
    tree = ast.parse(
        "import pytest\n"
        "torch = pytest.importorskip('torch')\n"
        "if True:\n    pytest.importorskip('optimum.exporters.onnx')\n"
        "ray = pytest.importorskip('ray')\n"
        "def f():\n    pytest.importorskip('torch')\n"
    )
    assert _module_level_skips(tree) == [(2, "torch"), (4, "optimum.exporters.onnx")]


def test_no_test_module_skips_itself_on_torch() -> None:
    """torch, transformers and optimum are not in the core install: a module-level
    ``importorskip`` of them hid the torch-free tests of its module where they are missing. The
    tests that need them ask for the ``torch`` / ``transformers`` fixtures (tests/conftest.py)."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: importorskip({name!r})"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for line, name in _module_level_skips(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert offenders == []


def test_every_public_name_imports_and_the_readme_lists_it() -> None:
    import faithgate

    for name in faithgate.__all__:
        assert getattr(faithgate, name) is not None, name
    # The public API is what users read in the package tree of docs/architecture.md.
    readme = (Path(__file__).parents[2] / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"__init__\.py +small lazy public API: (.+?)\n  \S", readme, re.S)
    assert block is not None
    listed = set(re.findall(r"\w+", block.group(1)))
    assert set(faithgate.__all__) - {"__version__"} == listed


def _architecture_doc() -> str:
    return (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def test_the_layers_table_is_pyprojects_layers_contract() -> None:
    """The rows of the layers table in docs/architecture.md are the layers of the contract in
    pyproject.toml, in order: the page is where a maintainer reads them."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["type"] == "layers" and "containers" not in c
    )
    doc = _architecture_doc()
    section = doc.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    documented = [
        " | ".join(re.findall(r"`([\w.]+)`", row.split(" | ", 1)[0].replace("\\|", "")))
        for row in rows
    ]
    assert documented == contract["layers"]
    assert f'"{contract["name"]}"' in section
    for other in config["tool"]["importlinter"]["contracts"]:
        assert f'"{other["name"]}"' in section, other["name"]


def test_the_layout_block_names_every_module() -> None:
    """Every entry of faithgate/, and every module of its packages, appears in the layout
    block of docs/architecture.md: a module added or moved shows there."""
    block = _architecture_doc().split("## Layout", 1)[1].split("```", 2)[1]
    named = set(re.findall(r"[\w.]+", block))
    missing = []
    for path in sorted((ROOT / "faithgate").rglob("*")):
        if "__pycache__" in path.parts or path.name == "__init__.py":
            continue
        if path.parent.name == "data":
            continue
        # Top-level files by their file name, a package's modules by their module name.
        if path.name not in named and path.stem not in named:
            missing.append(str(path.relative_to(ROOT)))
    assert missing == []
