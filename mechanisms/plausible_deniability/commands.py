"""``privlab pd-generate``: one plausible-deniability generation written as a bundle (a
``privlab.commands`` plug-in; :data:`DESCRIPTION` is its help).

    privlab pd-generate SPEC --out DIR [--config ID] [--set KEY=VALUE]

takes one ``pd_generation`` configuration of an experiment spec (the first, or ``--config``),
draws exactly what ``privlab run`` draws for it (the same seeded state stream), and writes the
released synthetics with their ledger and privacy statement (:mod:`.generation_run`). Every
input is checked, and ``DIR`` refused if it exists, before any work.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from privlab.platform.cli.commands import EXIT_OK, register_commands
from privlab.platform.core.errors import InputError

DESCRIPTION = ("Generate one pd_generation configuration of an experiment spec (the first, or --config) exactly as "
               "`privlab run` draws it, and write a new folder: released.csv and released.parquet (the released "
               "synthetic records), ledger.json, ledger.txt, privacy-statement.md, summary.json, config.toml and "
               "SHA256SUMS. Every input is checked, and --out refused if it exists, before any work.")


def _generate(args: argparse.Namespace) -> int:
    from privlab.mechanisms.plausible_deniability.generation_params import GenerationParams, coded_table
    from privlab.mechanisms.plausible_deniability.generation_run import BUNDLE_FILES, generate, write_bundle
    from privlab.mechanisms.tabular.bundle_files import CHECKSUMS, check_destination
    from privlab.platform.experiment.registry import build_params
    from privlab.platform.dp.seeding import trial_generator
    from privlab.platform.experiment.spec import load_spec
    from privlab.platform.execution.worker_tasks import STATE_STREAM

    out = Path(args.out)
    check_destination(out)
    spec = load_spec(args.spec, args.set or [])
    configs = [c for c in spec.configurations if c.workload == "pd_generation"]
    if not configs:
        raise InputError(f"{args.spec} has no pd_generation configuration")
    if args.config:
        configs = [c for c in configs if c.id == args.config]
        if not configs:
            raise InputError(f"--config {args.config!r} is not a pd_generation configuration of {args.spec}; "
                             f"`privlab validate {args.spec}` lists them")
    config = configs[0]
    if spec.seed is None:
        raise InputError(f"{args.spec} has no seed; pd-generate is a research run and needs one to be reproducible")
    params = build_params(GenerationParams, config.params, where=config.id)
    table = coded_table(params)
    rng = trial_generator(spec.seed, config.study_key, config.config_key, STATE_STREAM)
    generation = generate(params, table, rng=rng)
    write_bundle(out, params, generation, seed=spec.seed, config_id=config.id)
    released, candidates = len(generation.released), params.candidates
    total = generation.ledger.total()
    print(f"{config.id}: {released:,} of {candidates:,} candidates passed ({released / candidates:.1%}); "
          f"ledger ε = {total.epsilon:.6g}, δ = {total.delta:.3g}; model fit {generation.seconds['model_fit']:.1f} s, "
          f"synthesis and test {generation.seconds['synthesis_and_test']:.1f} s")
    print(f"wrote {out}/ ({', '.join((*BUNDLE_FILES, CHECKSUMS))})")
    if params.public_records is None:
        print("note: the split sizes are fractions of the data's record count, which the ledger's entropy "
              "sensitivities reveal; set public_records in the spec to fix them by the spec "
              "(privacy-statement.md)")
    return EXIT_OK


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    command = sub.add_parser(
        "pd-generate", help="generate a synthetic table with plausible deniability and write it as a bundle",
        description=DESCRIPTION)
    command.add_argument("spec", help="an experiment spec with a pd_generation study")
    command.add_argument("--out", required=True, help="the bundle folder to create (must not exist)")
    command.add_argument("--config", help="the configuration id (default: the first pd_generation one)")
    command.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a spec value")
    command.set_defaults(handler=_generate)


register_commands("plausible_deniability", add_commands)
