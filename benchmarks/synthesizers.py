"""Fit-and-sample time of MST, AIM and PrivBayes on the ACS excerpt, one core.

Each synthesizer is fitted at ε = 1 on the NIST ACS 2019 national excerpt as the ACS example
transforms it (experiments/acs/space.toml, its first transformation: ≈ 23,000 persons × 13
columns) and samples as many records; one fit each, in a fresh process, so Private-PGM's JAX
compilation is part of MST's and AIM's time as it is of a real run's. MST and AIM are read at
δ'' = 1e-9 through the zcdp accountant; PrivBayes (degree 2, ε split 0.3) is pure ε-DP.

    python benchmarks/synthesizers.py                 # all three
    python benchmarks/synthesizers.py --only mst      # one of them
    python benchmarks/synthesizers.py --only aim --breakdown   # and AIM's time per round

``--breakdown`` prints, for each Private-PGM estimate, the CPU seconds it took (waiting for
JAX's asynchronous computation to finish, which a plain run does not do), the part of them XLA
spent compiling, and the CPU seconds of the round's candidate scoring (the model's marginals
over every candidate), then their totals.

Ends with ``mst_fit_sample_seconds_acs`` (target ≤ 30), ``aim_fit_sample_seconds_acs``
(max_model_size 80 MB, target ≤ 300), ``privbayes_fit_sample_seconds_acs`` (for scale) and
the load average. On a shared machine wall time grows with the load; the CPU seconds of the
process (every thread; JAX is held to one) are printed beside it as ``*_cpu_seconds_acs``, the
figure that load does not inflate.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from privlab.mechanisms.release.flow import resolve_transformation  # noqa: E402
from privlab.mechanisms.release.workloads import _cleaned  # noqa: E402
from privlab.mechanisms.synthesizers.base import synthesizer_from_spec  # noqa: E402
from privlab.mechanisms.tabular.space import load_release_space  # noqa: E402
from privlab.platform.dp.ledger import Ledger  # noqa: E402
from privlab.platform.dp.randomness import SeededSource  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPACE = ROOT / "experiments" / "acs" / "space.toml"
DATA = ROOT.parent / "shared" / "data" / "nist_acs_excerpts" / "national" / "national2019.csv"
TRANSFORMATION = "age=decades,marital-status=grouped,education=grouped,income=coarse"
EPSILON, DELTA = 1.0, 1e-9
SETTINGS = {
    "mst": {},
    "aim": {"max_model_size": 80.0},
    "privbayes": {"epsilon_split": 0.3, "degree": 2},
}


def acs_codes(data: Path) -> tuple[object, object]:
    space = load_release_space(SPACE)
    transformation = resolve_transformation(space, TRANSFORMATION)
    frame = transformation.apply(_cleaned(str(SPACE), str(data)), source="ACS excerpt")
    return frame, transformation.domain


def fit_and_sample(name: str, frame: object, domain: object) -> tuple[float, float, object]:
    """Wall and CPU seconds (this process, every thread) of one fit and sample, and the fit."""
    zcdp = name in ("mst", "aim")
    ledger = (Ledger(epsilon_cap=EPSILON, delta_cap=DELTA, accountant="zcdp", delta_slack=DELTA) if zcdp
              else Ledger(epsilon_cap=EPSILON))
    began, cpu = time.perf_counter(), time.process_time()
    synth = synthesizer_from_spec(name, SETTINGS[name], where="benchmark").fit(
        frame, domain=domain, epsilon=EPSILON, ledger=ledger, source=SeededSource(np.random.default_rng(2026)))
    synth.sample(len(frame), rng=np.random.default_rng(1))  # type: ignore[arg-type]
    return time.perf_counter() - began, time.process_time() - cpu, synth


class RoundBreakdown:
    """Times each ``pgm.estimate`` (CPU, and XLA's compile time within it) and the
    ``pgm.project`` calls between two estimates (the round's candidate scoring), by wrapping
    the two functions for the benchmark's process."""

    def __init__(self) -> None:
        import jax.monitoring

        from privlab.mechanisms.synthesizers import pgm

        self.rows: list[tuple[int, int, float, float, float]] = []
        self._compile = 0.0
        self._scoring = 0.0
        self._estimate, self._project = pgm.estimate, pgm.project
        jax.monitoring.register_event_duration_secs_listener(self._on_event)
        pgm.estimate, pgm.project = self._timed_estimate, self._timed_project

    def _on_event(self, event: str, seconds: float, **_: object) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            self._compile += seconds

    def _timed_project(self, *args: object, **kwargs: object) -> object:
        began = time.process_time()
        try:
            return self._project(*args, **kwargs)
        finally:
            self._scoring += time.process_time() - began

    def _timed_estimate(self, domain: object, measurements: list, **kwargs: object) -> object:
        import jax

        compile_before, began = self._compile, time.process_time()
        model = jax.block_until_ready(self._estimate(domain, measurements, **kwargs))
        cpu = time.process_time() - began
        self.rows.append((len(self.rows), len(measurements), cpu, self._compile - compile_before, self._scoring))
        print(f"  estimate {len(self.rows) - 1:3d}: {len(measurements):3d} measurements, {len(model.cliques):2d} "
              f"cliques, {cpu:5.2f} s CPU ({self._compile - compile_before:5.2f} s compiling, wall); scoring "
              f"before it {self._scoring:5.2f} s CPU", flush=True)
        self._scoring = 0.0
        return model

    def close(self) -> None:
        import jax.monitoring

        from privlab.mechanisms.synthesizers import pgm

        pgm.estimate, pgm.project = self._estimate, self._project
        jax.monitoring.unregister_event_duration_listener(self._on_event)

    def summary(self) -> str:
        estimate = sum(r[2] for r in self.rows)
        compile_ = sum(r[3] for r in self.rows)
        scoring = sum(r[4] for r in self.rows) + self._scoring
        return (f"{len(self.rows)} estimates: {estimate:.1f} s CPU ({compile_:.1f} s wall compiling); "
                f"candidate scoring and sampling projections {scoring:.1f} s CPU")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(SETTINGS), action="append")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--breakdown", action="store_true", help="print the time of each Private-PGM estimate")
    args = parser.parse_args(argv)
    names = args.only or ["privbayes", "mst", "aim"]
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)", flush=True)
    frame, domain = acs_codes(args.data)
    print(f"ACS excerpt: {len(frame)} records x {len(domain)} columns, sizes {list(domain.sizes)}", flush=True)
    seconds, cpu = {}, {}
    for name in names:
        breakdown = RoundBreakdown() if args.breakdown and name in ("mst", "aim") else None
        seconds[name], cpu[name], synth = fit_and_sample(name, frame, domain)
        if breakdown is not None:
            breakdown.close()
            print(f"{name}: {breakdown.summary()}", flush=True)
        extra = ""
        if name == "aim":
            extra = f" ({len(synth.selected_)} rounds, last sigma {synth.sigmas_[-1]:.3g})"
        if name == "mst":
            extra = f" (tree {list(synth.tree_)})"
        print(f"{name}: fit + sample {seconds[name]:.1f} s wall, {cpu[name]:.1f} s CPU{extra}", flush=True)
    for name in names:
        print(f"{name}_fit_sample_cpu_seconds_acs: {cpu[name]:.1f}")
    for name in names:
        print(f"{name}_fit_sample_seconds_acs: {seconds[name]:.1f}")
    print(f"load_average_1min: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
