"""Mutation check: plant each privacy bug of ``mutations.toml`` in a copy and expect a test to fail.

Usage::

    python tests/mutations/check.py               # every mutation, in parallel on the CPUs
    python tests/mutations/check.py --only ID ... # a subset
    python tests/mutations/check.py --list        # validate the list and print it

For every mutation the check copies the repository's ``platform/``, ``mechanisms/``, ``tests/``
and ``pyproject.toml`` into a fresh temporary folder, replaces the mutation's ``original`` text
(which must occur exactly once) by its ``replacement``, and runs ``python -m pytest`` on the
mutation's test files there. The copy is imported instead of the installed checkout through a
shim folder first on ``PYTHONPATH`` whose ``privlab/platform`` and ``privlab/mechanisms`` are
symbolic links to the copy; ``PYTHONPATH`` also reaches Ray workers the tests start. Before any
mutation runs, a sanity step proves the shim works: the unmutated copy must import from the
copy and pass a fast test file, and a canary mutation (ε of every ledger event doubled) must be
caught.

A mutation is *caught* when pytest reports failing tests (exit code 1), *survived* when the
tests pass (exit code 0), and an *error* otherwise (collection or usage errors, a timeout): an
error is a defect of the check or of the list, never counted as a catch. The last line is
``mutations_caught: K/N``; the exit code is 0 only when K = N.

Why our own runner rather than mutmut or cosmic-ray: the mutations that matter here are a
curated list of privacy-critical edits (a sensitivity halved, a composition term dropped), each
with the tests that must catch it; generic tools generate thousands of operator mutations over
whole files, need their own configuration for the package-dir layout (``platform/`` must never
shadow the standard library), and would not let CI state "these 38 privacy bugs are caught"
in a few minutes.

Measured on 2 cores: see benchmarks/RESULTS.md ("Mutation check").
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MUTATIONS_FILE = Path(__file__).resolve().with_name("mutations.toml")
COPIED = ("platform", "mechanisms", "tests", "experiments", "pyproject.toml")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "mlruns", "mlflow.db", ".privlab")
SANITY_TESTS = ("tests/test_ledger.py",)
CANARY = {
    "id": "canary-ledger-doubles-every-epsilon",
    "file": "platform/dp/basic_totals.py",
    "original": "eps.add((epsilon,))",
    "replacement": "eps.add((2 * epsilon,))",
    "description": "sanity: every basic-composition term doubled",
    "tests": list(SANITY_TESTS),
}


class MutationListError(ValueError):
    """The mutation list is malformed or out of date with the code."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Mutation:
    id: str
    file: str
    original: str
    replacement: str
    description: str
    tests: tuple[str, ...]
    k: str | None = None

    def location(self, root: Path = REPO) -> str:
        """``file:line`` of the original text in ``root``."""
        text = (root / self.file).read_text(encoding="utf-8")
        return f"{self.file}:{text[: text.index(self.original)].count(chr(10)) + 1}"


@dataclasses.dataclass(frozen=True)
class Outcome:
    mutation: Mutation
    verdict: str  # "caught" | "survived" | "error"
    seconds: float
    detail: str


def parse_mutations(entries: Iterable[dict], *, root: Path = REPO) -> list[Mutation]:
    """Validate raw entries against the code in ``root``.

    Raises:
        MutationListError: a missing or unknown key, a duplicate id, a file or test file that does
            not exist, an ``original`` that does not occur exactly once, or a no-op replacement.
    """
    fields = {f.name for f in dataclasses.fields(Mutation)}
    required = fields - {"k"}
    mutations: list[Mutation] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"mutation #{index + 1} ({entry.get('id', '?')!r})"
        unknown = set(entry) - fields
        missing = required - set(entry)
        if unknown or missing:
            raise MutationListError(f"{where}: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}")
        if entry["id"] in seen:
            raise MutationListError(f"{where}: duplicate id")
        seen.add(entry["id"])
        path = root / entry["file"]
        if not path.is_file():
            raise MutationListError(f"{where}: file {entry['file']!r} does not exist")
        count = path.read_text(encoding="utf-8").count(entry["original"])
        if count != 1:
            raise MutationListError(
                f"{where}: its original text occurs {count} times in {entry['file']} (must be exactly once); "
                "update the entry to the code as it is now"
            )
        if entry["replacement"] == entry["original"]:
            raise MutationListError(f"{where}: the replacement equals the original")
        tests = tuple(entry["tests"])
        if not tests:
            raise MutationListError(f"{where}: names no tests")
        for test in tests:
            if not (root / test).is_file():
                raise MutationListError(f"{where}: test file {test!r} does not exist")
        mutations.append(Mutation(**{**entry, "tests": tests}))
    return mutations


def load_mutations(path: Path = MUTATIONS_FILE, *, root: Path = REPO) -> list[Mutation]:
    with path.open("rb") as handle:
        document = tomllib.load(handle)
    return parse_mutations(document.get("mutation", []), root=root)


def classify(returncode: int | None) -> str:
    """pytest's exit code → verdict: 1 (tests failed) is a catch, 0 a survivor, anything else an error."""
    if returncode == 1:
        return "caught"
    if returncode == 0:
        return "survived"
    return "error"


def make_copy(destination: Path, mutation: Mutation | None) -> tuple[Path, Path]:
    """Copy the repository into ``destination`` (with the mutation applied) and build the import shim.

    Returns:
        ``(copy, shim)``: the repository copy (run pytest there) and the folder to put first on
        ``PYTHONPATH``.
    """
    copy = destination / "repo"
    copy.mkdir(parents=True)
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=IGNORED)
        else:
            shutil.copy2(source, copy / name)
    shared = REPO.parent / "shared"
    if shared.exists():  # the tests find public data at ../shared relative to the checkout
        (destination / "shared").symlink_to(shared, target_is_directory=True)
    if mutation is not None:
        target = copy / mutation.file
        text = target.read_text(encoding="utf-8")
        if text.count(mutation.original) != 1:
            raise MutationListError(f"{mutation.id}: original text not found exactly once in the copy")
        target.write_text(text.replace(mutation.original, mutation.replacement), encoding="utf-8")
    shim = destination / "shim" / "privlab"
    shim.mkdir(parents=True)
    (shim / "platform").symlink_to(copy / "platform", target_is_directory=True)
    (shim / "mechanisms").symlink_to(copy / "mechanisms", target_is_directory=True)
    return copy, shim.parent


def _environment(shim: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(shim), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def imported_from(copy: Path, shim: Path) -> str:
    """Where ``privlab.platform.dp.ledger`` is imported from with the shim (for the sanity step)."""
    code = ("import pathlib, privlab.platform.dp.ledger as m, privlab.mechanisms.basic.laplace as l; "
            "print(pathlib.Path(m.__file__).resolve()); print(pathlib.Path(l.__file__).resolve())")
    result = subprocess.run([sys.executable, "-c", code], cwd=copy, env=_environment(shim),
                            capture_output=True, text=True, check=False, timeout=120)
    return result.stdout + result.stderr


def run_one(mutation: Mutation | None, tests: Sequence[str], *, k: str | None, timeout: float) -> tuple[int | None, str]:
    """Run ``tests`` on a fresh copy (mutated when ``mutation`` is given); ``(exit code, output tail)``."""
    with tempfile.TemporaryDirectory(prefix="privlab-mutation-") as folder:
        copy, shim = make_copy(Path(folder), mutation)
        command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly", *tests]
        if k:
            command += ["-k", k]
        try:
            result = subprocess.run(command, cwd=copy, env=_environment(shim), capture_output=True,
                                    text=True, check=False, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"timed out after {timeout:.0f} s"
        lines = (result.stdout + result.stderr).strip().splitlines()
        return result.returncode, "\n".join(lines[-12:])


def check(mutation: Mutation, *, timeout: float) -> Outcome:
    started = time.perf_counter()
    code, output = run_one(mutation, mutation.tests, k=mutation.k, timeout=timeout)
    return Outcome(mutation, classify(code), time.perf_counter() - started, output)


def sanity(*, timeout: float) -> list[str]:
    """Problems with the harness itself (empty when the shim imports the copy and the canary dies)."""
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="privlab-mutation-") as folder:
        copy, shim = make_copy(Path(folder), None)
        where = imported_from(copy, shim)
        if where.count(str(copy.resolve())) != 2:
            problems.append(f"the shim does not import the copy (got {where.strip()!r})")
    code, output = run_one(None, SANITY_TESTS, k=None, timeout=timeout)
    if code != 0:
        problems.append(f"the unmutated copy fails {SANITY_TESTS}:\n{output}")
    canary = parse_mutations([CANARY])[0]
    outcome = check(canary, timeout=timeout)
    if outcome.verdict != "caught":
        problems.append(f"the canary mutation was not caught ({outcome.verdict}):\n{outcome.detail}")
    return problems


def _first_failure(output: str) -> str:
    """`` by tests/x.py::name`` for the first failed test pytest reported, or ``""``."""
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return f"  by {line.split(' ', 1)[1].split(' - ', 1)[0]}"
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Plant each privacy-critical mutation in a copy and run its tests.")
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these mutation ids")
    parser.add_argument("--list", action="store_true", help="validate the list, print it and exit")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutations run at once (default: CPUs)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per mutation (default 600)")
    parser.add_argument("--skip-sanity", action="store_true", help="skip the harness sanity step")
    args = parser.parse_args(argv)
    try:
        mutations = load_mutations()
    except MutationListError as error:
        print(f"mutation list error: {error}", file=sys.stderr)
        return 2
    if args.only:
        unknown = sorted(set(args.only) - {m.id for m in mutations})
        if unknown:
            print(f"unknown mutation id(s): {', '.join(unknown)}", file=sys.stderr)
            return 2
        mutations = [m for m in mutations if m.id in set(args.only)]
    if args.list:
        for m in mutations:
            print(f"{m.id:48s} {m.location()}  {m.description}")
        print(f"{len(mutations)} mutations")
        return 0
    started = time.perf_counter()
    if not args.skip_sanity:
        problems = sanity(timeout=args.timeout)
        if problems:
            for problem in problems:
                print(f"harness error: {problem}", file=sys.stderr)
            print(f"mutations_caught: 0/{len(mutations)}")
            return 2
        print(f"sanity: the copy is imported, passes {SANITY_TESTS[0]}, and the canary is caught", flush=True)
    outcomes: list[Outcome] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(check, m, timeout=args.timeout) for m in mutations]
        for future in concurrent.futures.as_completed(futures):
            outcome = future.result()
            outcomes.append(outcome)
            print(f"[{len(outcomes):2d}/{len(mutations)}] {outcome.verdict:8s} {outcome.seconds:6.1f} s  "
                  f"{outcome.mutation.id}{_first_failure(outcome.detail)}", flush=True)
    failures = [o for o in outcomes if o.verdict != "caught"]
    for outcome in sorted(failures, key=lambda o: o.mutation.id):
        m = outcome.mutation
        print(f"\n{outcome.verdict.upper()}: {m.id} at {m.location()}\n  {m.description}\n"
              f"  tests: {' '.join(m.tests)}{f' -k {m.k!r}' if m.k else ''}\n"
              + "\n".join(f"  | {line}" for line in outcome.detail.splitlines()))
    caught = len(outcomes) - len(failures)
    print(f"\nmutation check took {time.perf_counter() - started:.0f} s with {args.jobs} job(s)")
    print(f"mutations_caught: {caught}/{len(outcomes)}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
