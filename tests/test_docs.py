"""The docs name what the code has: ARCHITECTURE.md every platform floor and module and every mechanism folder,
README's layout table every folder."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL = ("platform", "mechanisms", "experiments", "cluster", "benchmarks", "tests")


def _code_spans(markdown: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", markdown)


def _named(stem: str, spans: list[str]) -> bool:
    """Whether a code span names the module ``stem``: ``stem``, ``stem.py`` or a path ending in it."""
    return any(re.search(rf"(^|[/\s.`(]){re.escape(stem)}(\.py)?($|[\s,:)/])", span) for span in spans)


def _platform_modules() -> list[Path]:
    return sorted(p for p in (ROOT / "platform").rglob("*.py") if p.stem not in ("__init__", "__main__"))


def _packages(folder: str) -> list[str]:
    return sorted(p.parent.relative_to(ROOT / folder).as_posix() for p in (ROOT / folder).rglob("__init__.py"))


def _layout_rows(readme: str) -> dict[str, str]:
    """README's layout table: first cell (a folder in backticks) → the rest of the row."""
    rows = {}
    for line in readme.splitlines():
        match = re.match(r"^\| `([\w.-]+)/` \|(.*)$", line)
        if match:
            rows[match[1]] = match[2]
    return rows


def test_architecture_names_every_platform_module_and_mechanism() -> None:
    spans = _code_spans((ROOT / "ARCHITECTURE.md").read_text())
    unnamed = [p.relative_to(ROOT).as_posix() for p in _platform_modules() if not _named(p.stem, spans)]
    unnamed += [f"mechanisms/{m}/" for m in _packages("mechanisms") if not _named(m, spans)]
    unnamed += [f"platform/{floor}/" for floor in _packages("platform") if not _named(floor, spans)]
    assert not unnamed, "ARCHITECTURE.md does not name: " + ", ".join(unnamed)


def test_readme_layout_table_lists_every_folder() -> None:
    rows = _layout_rows((ROOT / "README.md").read_text())
    missing = [f"{folder}/" for folder in TOP_LEVEL if folder not in rows]
    assert not missing, "README's layout table has no row for " + ", ".join(missing)
    for folder in ("platform", "mechanisms"):
        spans = _code_spans(rows[folder])
        missing += [f"{folder}/{package}" for package in _packages(folder) if not _named(package, spans)]
    assert not missing, "README's layout table does not list " + ", ".join(missing)


def test_the_docs_checks_can_fail() -> None:
    assert _named("ledger", ["platform/dp/ledger.py"]) and _named("ledger", ["ledger.py (the ledger)"])
    assert not _named("ledger", ["ledgers.py"]) and not _named("audit", ["audit_run.py"])
    assert _layout_rows("| `platform/` | `dp` |\n| x | y |") == {"platform": " `dp` |"}
