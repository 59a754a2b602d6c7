"""README.md must be true: its paths exist, its commands parse, its test commands select tests, CI runs them."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from privlab.platform.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
TOP_FOLDERS = ("experiments/", "platform/", "mechanisms/", "cluster/", "benchmarks/", "tests/", ".ci/")


def _code_lines() -> list[str]:
    """Lines of the README's bash blocks, with continuations joined and comments removed."""
    lines: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S):
        pending = ""
        for raw in block.splitlines():
            line = pending + raw.split(" #", 1)[0].rstrip()
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            pending = ""
            if line.strip():
                lines.append(line.strip())
    return lines


def test_every_repository_path_the_readme_names_exists() -> None:
    named = set(re.findall(r"\]\(([^)#\s]+)\)", README))  # markdown links
    named |= {p for p in re.findall(r"[`\s(]((?:%s)[\w./-]+)" % "|".join(map(re.escape, TOP_FOLDERS)), README)}
    named = {p.rstrip(".,)") for p in named if not p.startswith(("http", "#"))}
    assert len(named) >= 10
    missing = sorted(p for p in named if not (ROOT / p).exists() and "*" not in p)
    assert not missing, f"README names paths that do not exist: {missing}"


def test_every_privlab_command_in_the_readme_parses() -> None:
    parser = build_parser()
    commands = [line for line in _code_lines() if line.startswith("privlab ")]
    assert len(commands) >= 15
    for line in commands:
        if "[" in line or "|" in line:  # a usage synopsis, not a command
            continue
        args = shlex.split(line)[1:]
        args = [a for a in args if a not in (">", "&&")]
        if ">" in line:
            args = shlex.split(line.split(">", 1)[0])[1:]
        try:
            parser.parse_args(args)
        except SystemExit as error:
            pytest.fail(f"README command does not parse ({error.code}): {line}")


def test_the_readme_example_dataset_exists_where_a_spec_would_look() -> None:
    (relative,) = re.findall(r'path = "((?:\.\./)+shared/data/[^"]+)"', README)
    shared = ROOT.parent / "shared"
    if not shared.exists():
        pytest.skip(f"the public datasets are not beside the checkout ({shared})")
    assert (ROOT / "experiments" / "any" / relative).resolve().is_file()


@pytest.mark.slow  # several subprocesses: kept out of the default run's 6-minute budget
def test_the_slow_marker_selects_tests_and_ci_runs_the_readme_commands() -> None:
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "slow"],
                               cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert re.search(r"^(\d+)/\d+ tests collected", collected.stdout, flags=re.M), collected.stdout[-500:]
    assert int(re.search(r"^(\d+)/\d+ tests collected", collected.stdout, flags=re.M).group(1)) >= 1
    ci = (ROOT / ".ci" / "run").read_text()
    code = _code_lines()
    for command in ('pip install -e ".[dev]"', "python -m pytest", "python -m pytest -m slow"):
        assert command in code or any(line.startswith(command) for line in code) or command in README
        assert command in ci, f".ci/run does not run {command!r}"
    assert "python3 -m venv .venv" in ci and "python3 -m venv .venv" in README


@pytest.mark.slow  # a 100,000-trial audit
def test_the_readme_audit_example_is_what_the_command_prints(tmp_path: Path) -> None:
    """The README's audit output block (issue 34 item 6: it showed 0.9272 and 20,000 trials)."""
    command = re.search(r"^(privlab audit laplace [^#\n]*?)\s+#", README, flags=re.M).group(1).split()
    block = re.search(r"```text\n(  claimed ε.*?)```", README, flags=re.S).group(1)
    done = subprocess.run([sys.executable, "-m", "privlab.platform.cli", *command[1:], "--serial"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    printed = [line.rstrip() for line in done.stdout.splitlines()]
    for line in block.rstrip().splitlines():
        assert line.rstrip() in printed, f"README shows {line!r}; the command printed:\n{done.stdout}"
