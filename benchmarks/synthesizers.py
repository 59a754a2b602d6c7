"""privlab's MST and AIM beside the authors' reference implementations, on the ACS excerpt.

Every fit runs in a fresh process (so Private-PGM's JAX compilation is part of its time, as in a
real run) on the NIST ACS 2019 national excerpt as the ACS example transforms it
(experiments/acs/space.toml, its first transformation: 23,006 persons x 13 columns), at ε = 1,
δ = 1e-9, and samples as many records. For each fit the child reports its CPU seconds (fit +
sample, every thread; JAX held to one) and the parent computes the all-3-way workload error of
the AIM paper (the mean over every 3-way marginal of the ℓ1 distance of the normalised count
vectors, 0 to 2) of the records, and of the model's own marginals where the model is at hand.

Implementations:

* ``privlab``: :class:`~privlab.mechanisms.synthesizers.mst.MST` and
  :class:`~privlab.mechanisms.synthesizers.aim.AIM` at the ρ of (ε, δ) through the zcdp
  accountant, replace-one neighbours (the ledger's relation);
* ``reference``: ``mechanisms/mst.py`` and ``mechanisms/aim.py`` of ryan112358/private-pgm (a
  checkout in a scratch folder, ``--reference DIR``: nothing of it is copied here), run on mbi 2.0
  through a thin adapter (its ``estimation.mirror_descent`` call is mbi 2.0's ``MirrorDescent``,
  its ``Dataset`` is built from and read as a DataFrame, ``Domain.attrs`` is
  ``attributes``, a model's ``cliques`` a list) at the same ρ, **add/remove-one** neighbours (its relation);
* ``reference_replace_one``: the same code at the ρ' whose add/remove guarantee is a replace-one
  ρ-zCDP guarantee: its Gaussian measurements cost twice as much under replace-one (ℓ2
  sensitivity √2 for 1) and its selections four times (utility sensitivity 2 for 1), so MST (⅔ of
  ρ' on measurements, ⅓ on selections) is replace-one (8/3)ρ'-zCDP and AIM (0.9 and 0.1) 2.2ρ':
  ρ' = 3ρ/8 and ρ/2.2. This is the comparison at privlab's relation.

The authors' code draws from NumPy's global generator, seeded in its child process from the
fit's ``SeedSequence(ROOT, spawn_key=(method, fit))``; privlab's fits draw from the same seed
sequence through their own generators.

    python benchmarks/synthesizers.py --reference DIR                 # MST 5 fits, AIM 5 fits each
    python benchmarks/synthesizers.py --reference DIR --aim-fits 1    # AIM's reference: ~13 min CPU a fit
    python benchmarks/synthesizers.py --smoke                         # 6 columns, 3,000 records, privlab only

Prints per fit, then ``name: value`` lines: ``{mst,aim}_error_over_reference_acs`` (mean records'
error, privlab / reference), ``..._over_reference_replace_one_acs``, ``{mst,aim}_seconds_over_
reference_acs`` (mean CPU seconds), the models' own errors, ``aim_error_over_dpmm_acs`` with the
reason it is skipped (dpmm's pins need a venv of its own, not built here yet), the fit counts and
the load average before and after.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPACE = ROOT / "experiments" / "acs" / "space.toml"
SHARED = Path(os.environ.get("PRIVLAB_SHARED", "/work/shared"))
DATA = SHARED / "data" / "nist_acs_excerpts" / "national" / "national2019.csv"
TRANSFORMATION = "age=decades,marital-status=grouped,education=grouped,income=coarse"
EPSILON, DELTA = 1.0, 1e-9
SEED_ROOT = 20260047
SMOKE_COLUMNS, SMOKE_RECORDS = 6, 3000
RELATION_FACTOR = {"mst": 3.0 / 8.0, "aim": 1.0 / 2.2}
"""ρ'/ρ: the add/remove budget of the reference whose replace-one guarantee is ρ (module docstring)."""


def acs_codes(data: Path, *, smoke: bool) -> tuple[np.ndarray, list[str], list[int]]:
    """The ACS excerpt as privlab's transformation codes it: a ``(n, d)`` array, names, sizes."""
    from privlab.mechanisms.release.flow import resolve_transformation
    from privlab.mechanisms.release.workloads import _cleaned
    from privlab.mechanisms.tabular.space import load_release_space

    space = load_release_space(SPACE)
    transformation = resolve_transformation(space, TRANSFORMATION)
    frame = transformation.apply(_cleaned(str(SPACE), str(data)), source="ACS excerpt")
    names, sizes = list(transformation.domain.names), list(transformation.domain.sizes)
    codes = frame[names].to_numpy(dtype=np.int64)
    if smoke:
        codes, names, sizes = codes[:SMOKE_RECORDS, :SMOKE_COLUMNS], names[:SMOKE_COLUMNS], sizes[:SMOKE_COLUMNS]
    return codes, names, sizes


def workload_error(real: np.ndarray, marginal_of: object, sizes: list[int]) -> float:
    """Mean over all 3-way marginals of ‖M_r(D)/n − q_r‖₁, with ``q_r = marginal_of(cols)`` the
    synthetic records' or the model's normalised marginal (row-major over ``cols``)."""
    errors = []
    for cols in itertools.combinations(range(len(sizes)), 3):
        errors.append(float(np.abs(_normalised_counts(real, cols, sizes) - marginal_of(cols)).sum()))  # type: ignore[operator]
    return float(np.mean(errors))


def _normalised_counts(codes: np.ndarray, cols: tuple[int, ...], sizes: list[int]) -> np.ndarray:
    index = np.zeros(codes.shape[0], dtype=np.int64)
    for c in cols:
        index = index * sizes[c] + codes[:, c]
    return np.bincount(index, minlength=math.prod(sizes[c] for c in cols)) / codes.shape[0]


def _model_marginals(model: object, names: list[str]) -> object:
    from privlab.mechanisms.synthesizers import pgm

    def marginal(cols: tuple[int, ...]) -> np.ndarray:
        values = pgm.project(model, tuple(names[c] for c in cols))
        return values / values.sum()

    return marginal


# --- one fit, in a child process -------------------------------------------------------------------


def _child(task: dict, codes: np.ndarray, names: list[str], sizes: list[int]) -> dict:
    seed = np.random.SeedSequence(SEED_ROOT, spawn_key=(("mst", "aim").index(task["method"]), task["fit"]))
    if task["implementation"] == "privlab":
        return _privlab_fit(task, codes, names, sizes, seed)
    return _reference_fit(task, codes, names, sizes, seed)


def _privlab_fit(task: dict, codes: np.ndarray, names: list[str], sizes: list[int],
                 seed: np.random.SeedSequence) -> dict:
    import pandas as pd

    from privlab.mechanisms.synthesizers.base import synthesizer_from_spec
    from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
    from privlab.platform.dp.ledger import Ledger
    from privlab.platform.dp.randomness import SeededSource

    domain = Domain(tuple(ColumnDomain(name=name, labels=tuple(str(v) for v in range(size)))
                          for name, size in zip(names, sizes, strict=True)))
    frame = pd.DataFrame(codes, columns=names)
    fit_stream, sample_stream = seed.spawn(2)
    ledger = Ledger(epsilon_cap=EPSILON, delta_cap=DELTA, accountant="zcdp", delta_slack=DELTA)
    cpu = time.process_time()
    synth = synthesizer_from_spec(task["method"], task["params"], where="benchmark").fit(
        frame, domain=domain, epsilon=EPSILON, ledger=ledger, source=SeededSource(np.random.default_rng(fit_stream)))
    records = synth.sample(len(frame), rng=np.random.default_rng(sample_stream)).to_numpy(dtype=np.int64)
    seconds = time.process_time() - cpu
    model_error = workload_error(codes, _model_marginals(synth.model_, names), sizes)
    detail = (f"{len(synth.selected_)} rounds" if task["method"] == "aim" else f"tree {list(synth.tree_)}")
    return {"seconds": seconds, "records": records.tolist(), "model_error": model_error, "detail": detail,
            "rho": synth.rho_}


def _reference_fit(task: dict, codes: np.ndarray, names: list[str], sizes: list[int],
                   seed: np.random.SeedSequence) -> dict:
    import jax

    jax.config.update("jax_enable_x64", True)
    import mbi
    import pandas as pd

    from privlab.platform.dp.zcdp_conversion import zcdp_rho_for_epsilon

    # The adapter: the reference's calls, answered by mbi 2.0 (third-party code, run here only).
    def mirror_descent(domain, measurements, iters=1000, potentials=None, callback_fn=None):  # type: ignore[no-untyped-def]
        return mbi.estimation.MirrorDescent().estimate(domain, measurements, iters=iters, warm_start=potentials)

    mbi.estimation.mirror_descent = mirror_descent
    mbi.Dataset.df = property(lambda self: pd.DataFrame(self.data))
    mbi.Domain.attrs = property(lambda self: self.attributes)
    mbi.MarkovRandomField.cliques = property(lambda self: list(self.potentials.cliques))  # a list, as it adds one
    sys.path.insert(0, str(Path(task["reference"]).resolve()))
    np.random.seed(seed.generate_state(1)[0])  # noqa: NPY002 - the reference draws from the global generator
    rho = zcdp_rho_for_epsilon(EPSILON, DELTA) * (RELATION_FACTOR[task["method"]] if task["relation"] == "replace_one"
                                                  else 1.0)
    domain = mbi.Domain(tuple(names), tuple(sizes))
    data = mbi.Dataset({name: codes[:, j] for j, name in enumerate(names)}, domain)
    quiet = io.StringIO()
    cpu = time.process_time()
    model = None
    with contextlib.redirect_stdout(quiet):
        if task["method"] == "mst":
            import mst

            mst.cdp_rho = lambda epsilon, delta: rho
            mst.Dataset = lambda df, domain: mbi.Dataset(  # its DataFrame, as mbi 2.0's integer columns
                {c: np.asarray(df[c], dtype=np.int64) for c in df.columns}, domain)
            synth = mst.MST(data, EPSILON, DELTA)
        else:
            import aim

            mechanism = aim.AIM(EPSILON, DELTA, **{k: v for k, v in task["params"].items() if k == "rounds"})
            mechanism.rho = rho
            workload = [(cl, 1.0) for cl in itertools.combinations(names, 3)]
            model, synth = mechanism.run(data, workload)
    seconds = time.process_time() - cpu
    records = np.stack([np.asarray(synth.data[name]) for name in names], axis=1).astype(np.int64)
    model_error = None if model is None else workload_error(codes, _model_marginals(model, names), sizes)
    return {"seconds": seconds, "records": records.tolist(), "model_error": model_error, "detail": "", "rho": rho}


# --- the parent ---------------------------------------------------------------------------------


def run_fit(task: dict, args: argparse.Namespace) -> dict:
    """One fit in a fresh process; its result with the records' error."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "result.json"
        command = [sys.executable, __file__, "--child", json.dumps(task), "--child-out", str(out), "--data",
                   str(args.data)] + (["--smoke"] if args.smoke else [])
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            raise RuntimeError(f"fit {task} failed:\n{completed.stderr[-3000:]}")
        return json.loads(out.read_text())


def _print_ratios(method: str, results: dict[tuple[str, str], list[dict]], implementations: list[str]) -> None:
    ours = results.get((method, "privlab"), [])
    print(f"{method}_fits_privlab: {len(ours)}")
    print(f"{method}_error_privlab_acs: {_mean([r['error'] for r in ours]):.4f}")
    print(f"{method}_model_error_privlab_acs: {_mean([r['model_error'] for r in ours]):.4f}")
    print(f"{method}_cpu_seconds_privlab_acs: {_mean([r['seconds'] for r in ours]):.1f}")
    for implementation in implementations[1:]:
        theirs = results.get((method, implementation), [])
        if not theirs:
            continue
        print(f"{method}_fits_{implementation}: {len(theirs)}")
        print(f"{method}_error_{implementation}_acs: {_mean([r['error'] for r in theirs]):.4f}")
        if any(r["model_error"] is not None for r in theirs):
            print(f"{method}_model_error_{implementation}_acs: {_mean([r['model_error'] for r in theirs]):.4f}")
        print(f"{method}_cpu_seconds_{implementation}_acs: {_mean([r['seconds'] for r in theirs]):.1f}")
        print(f"{method}_error_over_{implementation}_acs: "
              f"{_mean([r['error'] for r in ours]) / _mean([r['error'] for r in theirs]):.3f}")
        print(f"{method}_seconds_over_{implementation}_acs: "
              f"{_mean([r['seconds'] for r in ours]) / _mean([r['seconds'] for r in theirs]):.3f}", flush=True)


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--reference", type=Path, help="a folder holding private-pgm's mechanisms/ files")
    parser.add_argument("--mst-fits", type=int, default=5)
    parser.add_argument("--aim-fits", type=int, default=5)
    parser.add_argument("--only", choices=["mst", "aim"], action="append")
    parser.add_argument("--replace-one", choices=["mst", "aim"], nargs="*", default=["mst", "aim"],
                        help="the methods whose reference also runs at privlab's relation (default: both)")
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_COLUMNS} columns, {SMOKE_RECORDS} records, "
                        "privlab only, one fit each, AIM with 8 rounds")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    codes, names, sizes = acs_codes(args.data, smoke=args.smoke)
    if args.child:
        args.child_out.write_text(json.dumps(_child(json.loads(args.child), codes, names, sizes)))
        return 0

    load_before = os.getloadavg()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)} ({os.cpu_count()} CPUs)", flush=True)
    print(f"ACS excerpt: {codes.shape[0]} records x {codes.shape[1]} columns, sizes {sizes}", flush=True)
    implementations = ["privlab"]
    if args.reference is not None and not args.smoke:
        if not (args.reference / "mst.py").is_file() or not (args.reference / "aim.py").is_file():
            parser.error(f"--reference ({str(args.reference)!r}) must be a folder holding private-pgm's mechanisms/ "
                         "files (mst.py, aim.py, mechanism.py, cdp2adp.py)")
        implementations += ["reference", "reference_replace_one"]
    else:
        print("reference: skipped (" + ("--smoke" if args.smoke else "no --reference folder given") + ")")
    params = {"mst": {}, "aim": {"max_model_size": 80.0}}
    if args.smoke:
        params["aim"] = {"max_model_size": 80.0, "rounds": 8}
    fits = {"mst": 1 if args.smoke else args.mst_fits, "aim": 1 if args.smoke else args.aim_fits}
    results: dict[tuple[str, str], list[dict]] = {}
    for method in args.only or ["mst", "aim"]:
        for fit in range(fits[method]):
            for implementation in implementations:
                if implementation == "reference_replace_one" and method not in args.replace_one:
                    continue
                task = {"method": method, "fit": fit, "implementation": implementation,
                        "relation": "replace_one" if implementation == "reference_replace_one" else "own",
                        "reference": str(args.reference), "params": params[method]}
                result = run_fit(task, args)
                records = np.asarray(result.pop("records"), dtype=np.int64)
                result["error"] = workload_error(codes, lambda cols, r=records: _normalised_counts(r, cols, sizes),
                                                 sizes)
                results.setdefault((method, implementation), []).append(result)
                model = "-" if result["model_error"] is None else f"{result['model_error']:.4f}"
                print(f"{method} {implementation:22s} fit {fit}: records' error {result['error']:.4f}, model's "
                      f"{model}, {result['seconds']:.1f} s CPU, rho {result['rho']:.6g} {result['detail']}",
                      flush=True)
        _print_ratios(method, results, implementations)
    print("aim_error_over_dpmm_acs: skipped (no dpmm runner yet: dpmm 0.1.9 pins numpy 1.26.4, pandas 2.1.0 and "
          "opendp 0.12.1, so it needs its own venv run as a subprocess, which this benchmark does not build)")
    print(f"load_average_1min_before: {load_before[0]:.2f}")
    print(f"load_average_1min: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
