"""``library_version``: the version of the build an import loads (a score's hash names it)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from faithgate.backends import _module_distributions, library_version


def _install(site: Path, dist: str, version: str, module: str = "fgfakemod") -> Path:
    """A minimal installed distribution ``dist`` providing package ``module`` in ``site``, as
    pip leaves it: its files (over any already there) and a RECORD with their SHA-256."""
    (site / module).mkdir(parents=True, exist_ok=True)
    init = f"# {dist} {version}\n".encode()
    (site / module / "__init__.py").write_bytes(init)
    digest = base64.urlsafe_b64encode(hashlib.sha256(init).digest()).rstrip(b"=").decode()
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    record = f"{module}/__init__.py,sha256={digest},{len(init)}\n{info.name}/METADATA,,\n"
    (info / "RECORD").write_text(record)
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


@pytest.mark.parametrize("last", ["gpu", "cpu"])
def test_of_two_builds_installed_over_each_other_the_one_on_disk(tmp_path, fresh, last) -> None:
    # faithgate[runtime] (onnxruntime), then pip install onnxruntime-gpu into the same directory:
    # both records are there, the files are the last install's
    site = tmp_path / "site"
    builds = {"cpu": ("fgfakemod", "1.0"), "gpu": ("fgfakemod-gpu", "2.0")}
    first = "cpu" if last == "gpu" else "gpu"
    _install(site, *builds[first])
    _install(site, *builds[last])
    fresh.syspath_prepend(str(site))
    assert library_version("fgfakemod") == builds[last][1]


def test_a_broken_record_elsewhere_does_not_stop_scoring(tmp_path, fresh) -> None:
    # an unrelated package's RECORD with a blank line makes packages_distributions() raise:
    # the version is then unknown (None), not an exception in every settings hash
    site = _install(tmp_path / "site", "fgfakemod-gpu", "2.0")
    broken = site / "fgbroken-1.0.dist-info"
    broken.mkdir()
    (broken / "METADATA").write_text("Metadata-Version: 2.1\nName: fgbroken\nVersion: 1.0\n")
    (broken / "RECORD").write_text("fgbroken/__init__.py,,\n\n")
    fresh.syspath_prepend(str(site))
    assert library_version("fgfakemod") in ("2.0", None)


def test_nothing_installed_is_none(fresh) -> None:
    assert library_version("fgfake_not_installed_anywhere") is None
