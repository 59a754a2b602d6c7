"""The release scheme's subcommands (a ``privlab.commands`` plug-in): ``evaluate``,
``shortlist``, ``release`` and ``verify``, and the TOML files they read (for ``privlab validate``).

Handlers import the release modules when they run, so ``privlab --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from privlab.platform.cli.commands import (
    EXIT_OK,
    TomlKind,
    add_run_reading_command,
    finished_summary,
    register_commands,
    register_toml_kind,
)
from privlab.platform.core.errors import InputError


def _sizes_text(result: dict[str, Any]) -> str:
    """How ``privlab evaluate`` handled the two sizes, in words."""
    n, m, resize = result["n"], result["candidate_n"], result["resize"]
    if resize is None:
        return f"sizes: original {n:,} records after cleaning, candidate {m:,}: equal, compared as they are"
    as_is = [c["name"] for c in result["criteria"] if not c["resized"]]
    lines = [f"sizes: original {n:,} records after cleaning, candidate {m:,}"]
    if as_is:
        lines.append(f"  compared as they are (proportions, means, fits): {', '.join(as_is)}")
    if resize["criteria"]:
        lines.append(f"  compared with the candidate resized to {n:,} records (they need equal sizes): "
                     f"{', '.join(resize['criteria'])}")
        lines.append(f"  resize: {resize['method']}; seed {resize['seed']} (--resize-seed)")
    return "\n".join(lines)


def _evaluate(args: argparse.Namespace) -> int:
    from privlab.mechanisms.release.evaluate import evaluate_candidate, read_candidate
    from privlab.mechanisms.release.workloads import flow_inputs
    from privlab.platform.experiment.spec import load_spec

    spec = load_spec(args.spec, args.set or [])  # experiment specs are research mode only (platform/experiment/spec.py)
    configs = [c for c in spec.configurations if c.workload == "release_flow"]
    if not configs:
        raise InputError(f"{args.spec} has no release_flow configuration to evaluate")
    if args.config:
        matching = [c for c in configs if c.id == args.config]
        if not matching:
            raise InputError(f"--config {args.config!r} is not a configuration of {args.spec}; "
                              f"`privlab validate {args.spec}` lists them (e.g. {configs[0].id})")
        config = matching[0]
        chosen = "--config"
    else:
        config = configs[0]
        chosen = (f"the spec's first of {len(configs)} configurations; --config ID for another "
                  f"(`privlab validate {args.spec}` lists them)" if len(configs) > 1 else "the spec's only configuration")
    space, settings, transformation = flow_inputs(config.params)
    # Both files are read as the space reads its data (na_values, clean-ups); a candidate privlab
    # wrote (a release's released.csv, a synthesizer's output) has a header even where the space's
    # raw files have none.
    original = space.read_raw(args.original, what=f"--original file {args.original!r}")
    result = evaluate_candidate(original, read_candidate(args.candidate, space=space,
                                                         what=f"--candidate file {args.candidate!r}"),
                                space=space, settings=settings, transformation=transformation,
                                resize_seed=args.resize_seed)
    result = {"config": config.id, **result}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{config.id} ({chosen}): transformation {result['transformation']}, n = {result['n']:,}")
        print(_sizes_text(result))
        width = max(len(c["name"]) for c in result["criteria"])
        for c in result["criteria"]:
            print(f"  {c['name'].ljust(width)}  {c['value']:<12.6g} threshold {c['threshold']:<8g} "
                  f"{'pass' if c['passed'] else 'FAIL'}")
        print(f"accepted: {'yes' if result['accepted'] else 'no'} (exact values, not DP: research use only)")
    return EXIT_OK


def _shortlist(args: argparse.Namespace) -> int:
    from privlab.mechanisms.release.evaluate import (
        relative_to,
        shortlist_from_summary,
        shortlist_toml,
        workload_params,
    )
    from privlab.platform.core.atomic_files import write_text_atomically
    from privlab.platform.tracking.store_location import existing_store_uri
    from privlab.platform.tracking.tracker import Tracker

    out = Path(args.out)
    if (out.exists() or out.is_symlink()) and not args.force:  # before the store is read: nothing to lose
        raise InputError(f"--out {str(out)!r} exists (the experiments' shortlists are committed, and release specs "
                          "read them); nothing was written. Write another file (and point the release spec's "
                          "`shortlist` at it), or give --force to replace this one")
    tracker = Tracker(existing_store_uri(args.tracking_uri))  # only reads: never creates a store
    _, summary = finished_summary(tracker, args.run_id, hint="give the grid search's run id")
    entries = shortlist_from_summary(summary, min_prob=args.min_prob)
    if not entries:
        best = max(e["metrics"]["accepted_rate"] for e in summary["configurations"] if e.get("workload") == "release_flow")
        raise InputError(f"no configuration of run {args.run_id} reached an estimated acceptance of {args.min_prob:g} "
                          f"(the best was {best:.3g}); nothing written. Lower --min-prob or run more attempts")
    first = workload_params(next(e for e in summary["configurations"] if e["id"] == entries[0].config_id))
    write_text_atomically(out, shortlist_toml(
        entries, run_id=args.run_id, min_prob=args.min_prob,
        space=relative_to(first["space"], out.resolve().parent),
        settings=relative_to(first["settings"], out.resolve().parent),
    ))
    print(f"{len(entries)} configuration(s) with estimated acceptance ≥ {args.min_prob:g} written to {out}")
    for entry in entries[:10]:
        print(f"  {entry.acceptance_rate:.3f} [{entry.ci_low:.3f}, {entry.ci_high:.3f}]  {entry.config_id}")
    if len(entries) > 10:
        print(f"  … and {len(entries) - 10} more, all written to {out}")
    return EXIT_OK


def _release(args: argparse.Namespace) -> int:
    from privlab.mechanisms.release.bundle import holds_transcript, kept_transcripts
    from privlab.mechanisms.tabular.bundle_files import stale_partials
    from privlab.mechanisms.release.run_release import run_release

    out = Path(args.out)
    for stale in stale_partials(out):  # named, never deleted: it may belong to a release running now
        what = ("it holds a private transcript, as sensitive as the private data" if holds_transcript(stale)
                else "it holds no transcript")
        print(f"privlab: warning: {str(stale)!r} is the staging folder of a release that did not finish (killed, "
              f"or still running elsewhere); nothing in it was published, but {what}. Unless a release is writing "
              f"into {str(stale.parent)!r} right now, delete it: rm -r -- {shlex.quote(str(stale))}", file=sys.stderr)
    for transcript, folder in kept_transcripts(out):  # an interrupted or failed bundle write's rescue
        if folder.is_dir():
            what = (f"kept when writing {str(folder)!r} failed or was interrupted; that bundle was regenerated from "
                    "it since (its private/transcript.bin holds the same), so this copy is no longer needed")
        else:
            what = (f"the sealed transcript of a release into {str(folder)!r} that was interrupted (or failed) while "
                    f"writing its bundle: the budget was spent. Regenerate that bundle with the same spec and data: "
                    f"privlab release SPEC --data PRIVATE --out {shlex.quote(str(folder))} --replay "
                    f"{shlex.quote(str(transcript))}; or give that release up")
        print(f"privlab: warning: {str(transcript)!r} is {what}. It is as sensitive as the private data; to remove "
              f"it: rm -- {shlex.quote(str(transcript))}", file=sys.stderr)
    from privlab.mechanisms.release.bundle import public_files_shown_by_git

    checkout = None if args.force else public_files_shown_by_git(out)
    if checkout is not None:
        print(f"privlab: warning: --out {str(out)!r} is inside the git work tree {str(checkout)!r} and not ignored "
              "there: `git status` will list the bundle's public files and `git add .` would commit them. Choose an "
              "--out outside the checkout, or add it to .gitignore (the transcript is checked separately)",
              file=sys.stderr)
    # SIGTERM raises KeyboardInterrupt here (privlab.platform.execution.interrupts.sigterm_as_interrupt, set
    # by the command line), which unwinds through the staging folder's cleanup: no partial bundle.
    result = run_release(args.spec, data=args.data, out=out, budget=args.budget, replay=args.replay,
                         progress=lambda message: print(f"privlab: {message}", file=sys.stderr, flush=True),
                         force=args.force)
    stated = f"ε = {result.total_epsilon:g}" if result.delta == 0.0 else \
        f"(ε, δ) = ({result.total_epsilon:.6g}, {result.delta:g})"
    print(f"release bundle written to {result.out} ({stated} within budget {result.budget:g})")
    print(f"  selected configuration: {result.configuration.as_dict()}")
    for name in result.public_files:
        print(f"  {result.out / name}")
    print(f"  {result.out / 'private'}/  (the transcript: as sensitive as the data; never publish it)")
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    from privlab.mechanisms.release.verify import verify_release

    result = verify_release(args.bundle, spec=args.spec, data=args.data, transcript=args.transcript)
    print(f"verified: {result.bundle} is what this spec, data and sealed transcript produce "
          f"(seal {result.seal[:16]}…; {len(result.files)} files reproduced byte for byte)")
    return EXIT_OK


def _validate_release_spec(path: Path) -> int:
    from privlab.mechanisms.release.guarantee import release_guarantee
    from privlab.mechanisms.release.shortlist import check_split, load_shortlist
    from privlab.mechanisms.release.spec import check_budget, load_release_spec

    spec = load_release_spec(path)
    if spec.delta is None:
        check_budget(spec, None)
    shortlist = load_shortlist(spec.shortlist)
    check_split(spec, shortlist.settings, shortlist.settings_path)
    guarantee = release_guarantee(spec, shortlist, None)
    selection = spec.selection
    if guarantee.is_pure:
        horizon = "infinite horizon" if selection.is_infinite_horizon else \
            f"γ = {selection.gamma:g}, at most {selection.steps} flows, ε₀ = {selection.epsilon0:g}"
        print(f"{spec.name}: valid release spec; total ε = {spec.total_epsilon:g} within budget {guarantee.budget:g} "
              f"(record count {spec.epsilon_count:g}; generation {spec.epsilon_generation:g} + acceptance "
              f"{spec.epsilon_acceptance:g} per flow; {horizon})")
    else:
        flows = "; ".join(f"{'/'.join(f.synthesizers)}: ρ = {f.rho:.6g}, ε = {f.epsilon:g}" for f in guarantee.flows)
        print(f"{spec.name}: valid release spec; total (ε, δ) = ({guarantee.epsilon:.6g}, {guarantee.delta:g}) within "
              f"budget {guarantee.budget:g} (record count {spec.epsilon_count:g}; random stopping with "
              f"γ = {selection.gamma:g} over flows {flows}; Rényi DP, Papernot & Steinke 2022)")
    print(f"  shortlist {spec.shortlist}: {len(shortlist.configurations)} configuration(s)")
    print("  run it with: privlab release SPEC --data PRIVATE --out DIR  (the data is checked then)")
    return EXIT_OK



def add_commands(sub: Any) -> None:
    """Add the release scheme's subparsers to ``privlab``'s."""
    evaluate = sub.add_parser(
        "evaluate", help="exact (non-DP) acceptance-criterion values of a candidate (research mode only)",
        description="Apply a release_flow spec's transformation (its first configuration, or --config) to an "
                    "original and a candidate file, both in the raw schema, and print every acceptance "
                    "criterion's exact value and pass/fail. Not private: for public data only.")
    evaluate.add_argument("spec", help="a grid spec whose studies run release_flow configurations")
    evaluate.add_argument("--original", required=True, metavar="PATH", help="original data (raw schema; csv or parquet)")
    evaluate.add_argument("--candidate", required=True, metavar="PATH", help="candidate data (raw schema)")
    evaluate.add_argument("--config", metavar="ID", help="configuration id (default: the spec's first)")
    evaluate.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a spec value")
    evaluate.add_argument("--resize-seed", type=int, default=0, metavar="SEED",
                          help="seed of the draw that resizes the candidate to the original's size for the "
                               "criteria that need equal sizes (default: 0)")
    evaluate.add_argument("--json", action="store_true", help="print JSON")
    evaluate.set_defaults(handler=_evaluate)

    add_run_reading_command(
        sub, "shortlist", handler=_shortlist, run_id_help="the grid search's parent run id",
        options={"--min-prob": {"type": float, "default": 0.1, "help": "minimal estimated acceptance (default 0.1)"},
                 "--force": {"action": "store_true", "help": "replace --out if it exists (refused otherwise: the "
                                                             "experiments' shortlists are committed)"}},
        out_metavar="PATH", out_help="TOML file to write (atomically)",
        help="write the configurations of a grid search worth taking to the private data",
        description="Read a finished release_flow grid-search run and write the configurations whose estimated "
                    "acceptance probability is at least --min-prob, best first, as TOML for the release spec.")

    release = sub.add_parser(
        "release", help="run the release scheme on private data (release mode, one machine) and write a bundle",
        description="Private selection over a release spec's shortlist with OS-CSPRNG noise, recorded in a "
                    "transcript; writes DIR atomically: released.csv, released.parquet, acceptance.json, "
                    "acceptance.md, config.toml, ledger.json, privacy-statement.md, README.md, transcript-seal.txt, "
                    "SHA256SUMS and private/transcript.bin (as sensitive as the data). Refuses to start when the "
                    "spec's total ε exceeds the budget, or when DIR is in a git work tree that does not ignore "
                    "the transcript.",
        epilog="replay: privlab release SPEC --data PRIVATE.csv --out DIR2 --replay DIR/private/transcript.bin "
               "reproduces DIR's public files byte for byte")
    release.add_argument("spec", help="release spec TOML (format: README, 'The final release')")
    release.add_argument("--data", required=True, metavar="PRIVATE", help="private raw data (csv, csv.gz, parquet)")
    release.add_argument("--out", required=True, metavar="DIR", help="bundle folder to create (must not exist)")
    release.add_argument("--budget", type=float, metavar="EPS", help="ε cap (default: the spec's budget)")
    release.add_argument("--replay", metavar="TRANSCRIPT", help="replay a release's private/transcript.bin")
    release.add_argument("--force", action="store_true",
                         help="write the bundle even inside a git work tree that does not ignore its private "
                              "transcript (refused otherwise: one `git add .` would commit it)")
    release.set_defaults(handler=_release)

    verify = sub.add_parser(
        "verify", help="audit a release bundle: check its transcript's seal, replay it, compare every public file",
        description="Checks the bundle's SHA256SUMS, that the transcript's hash chain is intact and equals the seal "
                    "the bundle publishes (transcript-seal.txt), then replays the release and compares every public "
                    "file byte for byte. Exit 0: verified; 5: not verified (the message says what differs); "
                    "2: bad input.")
    verify.add_argument("bundle", help="the published release bundle folder")
    verify.add_argument("--spec", required=True, help="the release spec the bundle was produced with")
    verify.add_argument("--data", required=True, metavar="PRIVATE", help="the private raw data the release read")
    verify.add_argument("--transcript", required=True, metavar="T",
                        help="the release's private/transcript.bin (kept with the private data)")
    verify.set_defaults(handler=_verify)



register_commands("release", add_commands)
register_toml_kind(TomlKind("release spec", frozenset({"shortlist", "selection"}),
                            "privlab release SPEC --data PRIVATE --out DIR", validate=_validate_release_spec))
register_toml_kind(TomlKind("shortlist", frozenset({"configuration", "space", "settings"}),
                            "privlab release (named by a release spec's shortlist)"))
register_toml_kind(TomlKind("release space", frozenset({"schema", "transformations"}),
                            "the grid and release specs that name it"))
register_toml_kind(TomlKind("flow settings file", frozenset({"criterion", "epsilon_generation"}),
                            "the grid and release specs that name it"))
