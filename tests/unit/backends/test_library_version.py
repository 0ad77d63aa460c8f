"""``library_version``: the version of the build an import loads (a score's hash names it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from faithgate.backends import _module_distributions, library_version


def _install(site: Path, dist: str, version: str, module: str = "fgfakemod") -> Path:
    """A minimal installed distribution ``dist`` providing package ``module`` in ``site``."""
    (site / module).mkdir(parents=True, exist_ok=True)
    (site / module / "__init__.py").write_text("")
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "RECORD").write_text(f"{module}/__init__.py,,\n{info.name}/METADATA,,\n")
    return site


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch):
    library_version.cache_clear()
    _module_distributions.cache_clear()
    yield monkeypatch
    library_version.cache_clear()
    _module_distributions.cache_clear()


def test_a_distribution_named_otherwise_than_its_module_is_found(tmp_path, fresh) -> None:
    # onnxruntime-gpu installs the module onnxruntime: its version, not None
    fresh.syspath_prepend(str(_install(tmp_path / "site", "fgfakemod-gpu", "2.0")))
    assert library_version("fgfakemod") == "2.0"


@pytest.mark.parametrize(("first", "expected"), [("gpu", "2.0"), ("cpu", "1.0")])
def test_of_two_builds_of_one_module_the_one_an_import_loads(
    tmp_path, fresh, first: str, expected: str
) -> None:
    # A CPU build installed and a GPU build on PYTHONPATH: the hash must name the one that runs
    sites = {
        "cpu": _install(tmp_path / "cpu", "fgfakemod", "1.0"),
        "gpu": _install(tmp_path / "gpu", "fgfakemod-gpu", "2.0"),
    }
    second = "cpu" if first == "gpu" else "gpu"
    fresh.syspath_prepend(str(sites[second]))
    fresh.syspath_prepend(str(sites[first]))
    assert library_version("fgfakemod") == expected


def test_a_distribution_adding_to_another_ones_package_does_not_name_it(tmp_path, fresh) -> None:
    # optimum-onnx installs into optimum's package directory: optimum's version is optimum's
    site = _install(tmp_path / "site", "fgfakemod-extra", "0.1")
    _install(site, "fgfakemod", "2.1")
    fresh.syspath_prepend(str(site))
    assert library_version("fgfakemod") == "2.1"


def test_nothing_installed_is_none(fresh) -> None:
    assert library_version("fgfake_not_installed_anywhere") is None
