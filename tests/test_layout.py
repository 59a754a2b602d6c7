"""The package layout that keeps the standard library's `platform` module working."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAPPED = {"privlab.platform": "platform", "privlab.mechanisms": "mechanisms"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_mapping_is_as_documented() -> None:
    assert _pyproject()["tool"]["setuptools"]["package-dir"] == MAPPED


def test_mapped_roots_have_no_init_and_tests_have_none() -> None:
    for folder in MAPPED.values():
        assert not (ROOT / folder / "__init__.py").exists(), f"{folder}/__init__.py shadows the stdlib"
    assert not list((ROOT / "tests").rglob("__init__.py"))


def test_every_subpackage_is_listed() -> None:
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    found = set(MAPPED)
    for package, folder in MAPPED.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *relative.parts]))
    assert found == listed, f"missing from pyproject packages: {sorted(found - listed)}; stale: {sorted(listed - found)}"


def test_no_module_is_named_after_a_stdlib_module() -> None:
    for folder in MAPPED.values():
        for module in (ROOT / folder).rglob("*.py"):
            if module.stem != "__init__":
                assert module.stem not in sys.stdlib_module_names, f"{module} shadows the stdlib module {module.stem!r}"


def test_stdlib_platform_wins_from_the_repo_root() -> None:
    result = subprocess.run([sys.executable, "-c", "import platform, numpy; print(platform.__file__)"],
                            cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
    printed = Path(result.stdout.strip())
    assert printed.name == "platform.py" and ROOT not in printed.parents


def test_package_imports_from_the_repo_root() -> None:
    code = "import privlab.platform.ledger as l, privlab.mechanisms.basic.laplace as m; print(l.__name__, m.__name__)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                            timeout=60)
    assert result.stdout.split() == ["privlab.platform.ledger", "privlab.mechanisms.basic.laplace"]
