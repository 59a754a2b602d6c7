"""Planted-bug check for the auditor: plant each bug of ``planted_bugs.toml`` and expect a violation.

Usage::

    python tests/mutations/audit_check.py               # every bug and the correct code, 2 at a time
    python tests/mutations/audit_check.py --only ID ... # a subset

For each bug the repository is copied and mutated as ``check.py`` does (its ``make_copy`` and
import shim), and ``privlab audit`` runs the bug's audit there (``--serial``, a fixed seed, a
private tracking store): exit 6 is *found*, exit 0 *missed*, anything else an *error* (never a
find). The same audits run once on the unmutated code, where each must exit 0. The last lines
are ``planted_bugs_found: K/N`` and ``violations_on_correct_code: V/M``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import importlib.util
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

BUGS_FILE = Path(__file__).resolve().with_name("planted_bugs.toml")
_spec = importlib.util.spec_from_file_location("privlab_mutation_check", Path(__file__).with_name("check.py"))
assert _spec is not None and _spec.loader is not None
mutation_check = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = mutation_check  # dataclasses look their module up there
_spec.loader.exec_module(mutation_check)
REPO = mutation_check.REPO
EXIT_VIOLATION = 6


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlantedBug:
    id: str
    file: str
    original: str
    replacement: str
    description: str
    audit: str
    settings: tuple[str, ...]
    trials: int
    seed: int

    def command(self, store: Path) -> list[str]:
        sets = [arg for setting in self.settings for arg in ("--set", setting)]
        return [sys.executable, "-m", "privlab.platform.cli", "audit", self.audit, *sets, "--trials", str(self.trials),
                "--seed", str(self.seed), "--serial", "--no-progress", "--tracking-uri", f"sqlite:///{store}"]


@dataclasses.dataclass(frozen=True)
class Finding:
    bug: PlantedBug
    mutated: bool
    verdict: str  # "found" | "missed" | "error" (mutated) ; "clean" | "violation" | "error" (correct code)
    seconds: float
    detail: str


def load_bugs(path: Path = BUGS_FILE) -> list[PlantedBug]:
    """The bugs, each checked against the code (its original text occurs exactly once)."""
    with path.open("rb") as handle:
        entries = tomllib.load(handle).get("bug", [])
    bugs = []
    for entry in entries:
        bug = PlantedBug(**{**entry, "settings": tuple(entry["settings"])})
        count = (REPO / bug.file).read_text(encoding="utf-8").count(bug.original)
        if count != 1:
            raise mutation_check.MutationListError(
                f"planted bug {bug.id!r}: its original text occurs {count} times in {bug.file} (must be once)")
        bugs.append(bug)
    return bugs


def run(bug: PlantedBug, *, mutated: bool, timeout: float) -> Finding:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="privlab-planted-") as folder:
        copy, shim = mutation_check.make_copy(Path(folder), bug if mutated else None)
        try:
            result = subprocess.run(bug.command(Path(folder) / "mlflow.db"), cwd=copy,
                                    env=mutation_check._environment(shim), capture_output=True, text=True,
                                    check=False, timeout=timeout)
            code, output = result.returncode, (result.stdout + result.stderr).strip()
        except subprocess.TimeoutExpired:
            code, output = None, f"timed out after {timeout:.0f} s"
    if mutated:
        verdict = {EXIT_VIOLATION: "found", 0: "missed"}.get(code, "error")  # type: ignore[arg-type]
    else:
        verdict = {EXIT_VIOLATION: "violation", 0: "clean"}.get(code, "error")  # type: ignore[arg-type]
    lines = [line for line in output.splitlines() if "verdict" in line or "lower bound" in line or "Error" in line]
    return Finding(bug, mutated, verdict, time.perf_counter() - started, "\n".join(lines[-4:]) or output[-800:])


def check_all(bugs: list[PlantedBug], *, jobs: int = 2, timeout: float = 1200.0) -> list[Finding]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run, bug, mutated=mutated, timeout=timeout) for bug in bugs for mutated in (True, False)]
        return [future.result() for future in futures]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these bugs")
    parser.add_argument("--jobs", type=int, default=2, help="audits run at once (default 2)")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per audit (default 1200)")
    args = parser.parse_args(argv)
    bugs = load_bugs()
    if args.only:
        unknown = sorted(set(args.only) - {b.id for b in bugs})
        if unknown:
            parser.error(f"unknown bug id(s) {unknown}; known: {[b.id for b in bugs]}")
        bugs = [b for b in bugs if b.id in args.only]
    findings = check_all(bugs, jobs=args.jobs, timeout=args.timeout)
    for finding in findings:
        where = "planted" if finding.mutated else "correct"
        print(f"{finding.bug.id:40s} {where:8s} {finding.verdict:10s} {finding.seconds:6.1f} s  ({finding.bug.audit})")
        print("    " + finding.detail.replace("\n", "\n    "))
    found = sum(f.verdict == "found" for f in findings if f.mutated)
    violations = sum(f.verdict != "clean" for f in findings if not f.mutated)
    print(f"planted_bugs_found: {found}/{len(bugs)}")
    print(f"violations_on_correct_code: {violations}/{len(bugs)}")
    return 0 if violations == 0 and found >= len(bugs) - 1 else 1


if __name__ == "__main__":
    sys.exit(main())
