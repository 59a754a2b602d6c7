"""Malformed input ends in exit 2 (or 5 for ``verify``) with a message, never a traceback, and
leaves nothing behind: no ``mlflow.db``, no ``mlruns``, no parent run, no folder (issue 30 items
4 and 5). The fuzz tests feed the spec reader mutated bytes of real specs and odd TOML shapes
(fixed seed, bounded, in process) and accept only a spec or a :class:`PrivlabError`.
"""

from __future__ import annotations

import datetime
import json
import random
import re
import struct
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privlab.mechanisms.release import bundle

from privlab.mechanisms.tabular import bundle_files
from privlab.platform.cli.commands import toml_kind
from privlab.platform.cli.main import EXIT_INPUT, EXIT_NOT_VERIFIED, main
from privlab.platform.core.errors import PrivlabError, SpecError, TranscriptError
from privlab.platform.dp.transcript import MAGIC, TranscriptReader, TranscriptWriter, read_records
from privlab.platform.experiment.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[1]
SPEC = 'name = "tiny"\nseed = 1\nworkload = "laplace_mean"\nrepetitions = 2\n[params]\nepsilon = 0.5\nn = 10\n'


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working folder (MLflow's default store would land here) holding ``tiny.toml``."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.toml").write_text(SPEC)
    return tmp_path


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], fragment: str, *, code: int = EXIT_INPUT) -> str:
    assert main(argv) == code
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err, err
    return err


def _left(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- spec files ---------------------------------------------------------------------------------

DEEP = {
    "array": "x = " + "[" * 2000 + "]" * 2000 + "\n",
    "inline table": "x = " + "{a = " * 2000 + "1" + "}" * 2000 + "\n",
    "table header": "[" + ".".join(["a"] * 2000) + "]\nx = 1\n",
    "dotted key": ".".join(["a"] * 2000) + " = 1\n",
    "moderate array": "x = " + "[" * 200 + "]" * 200 + "\n",  # readable by tomllib, too deep for a spec
}


@pytest.mark.parametrize("command", ["run", "validate", "pd-generate"])
def test_a_binary_spec_is_bad_input(workdir: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    (workdir / "binary.toml").write_bytes(b"name = \"x\"\n\xff\xfe\x00\x89PNG\r\n\x1a\n" + bytes(range(256)))
    extra = {"run": ["--serial"], "validate": [], "pd-generate": ["--out", str(workdir / "out")]}[command]
    _refused([command, "binary.toml", *extra], capsys, "not UTF-8 text")  # was: UnicodeDecodeError
    assert _left(workdir) == ["binary.toml", "tiny.toml"]


@pytest.mark.parametrize("shape", DEEP)
def test_deeply_nested_toml_is_bad_input(workdir: Path, capsys: pytest.CaptureFixture[str], shape: str) -> None:
    (workdir / "deep.toml").write_text(SPEC + "[tracking]\n" + DEEP[shape]
                                       if shape != "table header" else SPEC + DEEP[shape])
    _refused(["run", "deep.toml", "--serial"], capsys, "nest")  # was: RecursionError
    assert _left(workdir) == ["deep.toml", "tiny.toml"]


def test_deeply_nested_override_is_bad_input(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _refused(["validate", "tiny.toml", "--set", "params.n=" + "[" * 2000 + "]" * 2000], capsys, "--set params.n")
    _refused(["validate", "tiny.toml", "--set", ".".join(["tracking"] + ["a"] * 2000) + "=1"], capsys, "nest")


def test_an_experiment_name_longer_than_mlflow_accepts_is_bad_input(workdir: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "long.toml").write_text(SPEC + f'[tracking]\nexperiment = "{"e" * 501}"\n')
    _refused(["run", "long.toml", "--serial"], capsys, "501 characters long")  # was: MlflowException
    (workdir / "long.toml").write_text(SPEC.replace('"tiny"', f'"{"n" * 600}"'))
    _refused(["run", "long.toml", "--serial"], capsys, "the spec's name (the default experiment)")
    assert _left(workdir) == ["long.toml", "tiny.toml"]


# --- huge numbers and long names (issue 46 item 2) --------------------------------------------------

HUGE = "1" * 400


@pytest.mark.parametrize(("command", "extra"), [("run", ["--serial"]), ("validate", [])])
def test_a_400_digit_epsilon_is_bad_input(workdir: Path, capsys: pytest.CaptureFixture[str], command: str,
                                          extra: list[str]) -> None:
    (workdir / "huge.toml").write_text(SPEC + f"[budget]\nepsilon = {HUGE}\n")
    err = _refused([command, "huge.toml", *extra], capsys, "[budget] epsilon (an integer of 400 digits) must be")
    assert "too large for a float" in err and HUGE not in err  # was: OverflowError traceback, exit 1
    (workdir / "huge.toml").write_text(SPEC.replace("epsilon = 0.5", f"epsilon = {HUGE}"))
    _refused([command, "huge.toml", *extra], capsys, "epsilon (an integer of 400 digits) must be")
    assert _left(workdir) == ["huge.toml", "tiny.toml"]


@pytest.mark.parametrize("key", ["budget", "epsilon.generation", "selection.epsilon0", "selection.steps"])
def test_a_400_digit_number_in_a_release_spec_is_bad_input(workdir: Path, capsys: pytest.CaptureFixture[str],
                                                           key: str) -> None:
    text = (ROOT / "experiments" / "births" / "release.toml").read_text()
    table, _, name = key.rpartition(".")
    section = text if not table else text.split(f"[{table}]", 1)[1]
    line = next(line for line in section.splitlines() if line.startswith(f"{name} ="))
    (workdir / "release.toml").write_text(text.replace(line, f"{name} = {HUGE}", 1) if not table else
                                          text.replace(f"[{table}]" + section, f"[{table}]" + section.replace(
                                              line, f"{name} = {HUGE}", 1)))
    for argv in (["validate", "release.toml"],  # was: OverflowError traceback, exit 1
                 ["release", "release.toml", "--data", "private.csv", "--out", "bundle"]):
        err = _refused(argv, capsys, f"{key} (an integer of 400 digits) must be")
        assert HUGE not in err
    assert _left(workdir) == ["release.toml", "tiny.toml"]


def test_a_grid_value_beyond_the_workloads_bound_is_refused_before_the_store(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """n = 10**30 used to validate, then `run` created mlflow.db and mlruns/ and failed in numpy
    (exit 4, "Maximum allowed dimension exceeded"); 10**18 fits an int64 and would fail to allocate."""
    for n in (10**30, 10**18, 10**8 + 1):
        (workdir / "big.toml").write_text(SPEC.replace("n = 10\n", "") + f"[grid]\nn = [10, {n}]\n")
        for command, extra in (("validate", []), ("run", ["--serial"])):
            _refused([command, "big.toml", *extra], capsys, "must be an int in [2, 100000000]")
    assert _left(workdir) == ["big.toml", "tiny.toml"]


@pytest.mark.parametrize("workers", ["10" * 15, "0", str(10**30)])
def test_workers_beyond_any_machine_are_bad_input(workdir: Path, capsys: pytest.CaptureFixture[str],
                                                  workers: str) -> None:
    """--workers 10**30 used to reach Ray (a traceback) after creating the store."""
    _refused(["run", "tiny.toml", "--workers", workers, "--no-progress"], capsys, "--workers (")
    assert _left(workdir) == ["tiny.toml"]


@pytest.mark.parametrize(("name", "fragment"), [
    ("s" * 600, "600 bytes long"), ("é" * 120, "240 bytes long"), ("..", "cannot be '.' or '..'"),
    ("a/b", "nor hold '/'"), ("tab\there", "control characters"),
])
def test_a_study_name_that_cannot_name_files_is_refused_before_any_work(
        workdir: Path, capsys: pytest.CaptureFixture[str], name: str, fragment: str) -> None:
    """A 600-character study name used to run every configuration, then crash on its plots
    (OSError: File name too long) with the parent run FAILED."""
    (workdir / "long.toml").write_text(f'name = "tiny"\nseed = 1\n[[study]]\nname = {json.dumps(name)}\n'
                                       'workload = "laplace_mean"\n[study.params]\nepsilon = 0.5\nn = 10\n')
    _refused(["run", "long.toml", "--serial"], capsys, fragment)
    assert _left(workdir) == ["long.toml", "tiny.toml"]
    (workdir / "long.toml").write_text(SPEC.replace('"tiny"', json.dumps(name)) + '[tracking]\nexperiment = "x"\n')
    _refused(["validate", "long.toml"], capsys, fragment)


def test_workers_above_the_cpus_are_capped_with_a_warning(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 46 item 3: --workers 12 on 2 CPUs started 20 processes (3 GiB) without a word."""
    import argparse

    from privlab.platform.cli import run_commands

    monkeypatch.setattr(run_commands, "local_cpus", lambda: 2)
    args = argparse.Namespace(serial=False, address=None, workers=12, oversubscribe=False)
    run_commands.cap_local_workers(args)
    assert args.workers == 2
    err = capsys.readouterr().err
    assert "--workers 12 is more than this machine's 2 CPU(s); using 2" in err and "--oversubscribe" in err
    for kept in ({"workers": 12, "oversubscribe": True}, {"workers": 2}, {"workers": 12, "address": "10.0.0.1:6379"},
                 {"workers": 12, "serial": True}):
        args = argparse.Namespace(**{"serial": False, "address": None, "oversubscribe": False, **kept})
        run_commands.cap_local_workers(args)
        assert args.workers == kept["workers"]  # asked to, not local, or within the CPUs: kept as given
    assert capsys.readouterr().err == ""


# --- run options and the tracking store -------------------------------------------------------------


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--max-units", "0"], "--max-units (0) must be an int in [1, "),  # was: KeyError after a FAILED parent run
    (["--max-units", "-1"], "--max-units (-1) must be an int in [1, "),
    (["--tracking-uri", "ftp://example.org/runs"], "cannot store runs at a ftp:// URI"),  # was: exit 4
    (["--resume", "UNKNOWN"], "there is no tracking store at"),  # was: an empty mlflow.db
    (["--tracking-uri", "sqlite:///missing/parents/mlflow.db"], "the folder 'missing/parents' does not exist"),
    (["--tracking-uri", "missing/mlruns"], "the folder 'missing' does not exist"),
    (["--summary-json", "missing/summary.json"], "its folder does not exist"),
])
def test_bad_run_options_create_nothing(workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                        fragment: str) -> None:
    _refused(["run", "tiny.toml", "--serial", "--no-progress", *argv], capsys, fragment)
    assert _left(workdir) == ["tiny.toml"]  # no mlflow.db, no mlruns, no folder


def test_a_tracking_uri_from_the_environment_is_named(workdir: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "gopher://old.example/")
    _refused(["run", "tiny.toml", "--serial"], capsys, "(MLFLOW_TRACKING_URI)")
    assert _left(workdir) == ["tiny.toml"]


def test_run_options_check_their_values() -> None:
    from privlab.platform.run.runner import RunOptions

    for bad in ({"stop_after_units": 0}, {"stop_after_units": -1}, {"workers": 0}):
        with pytest.raises(SpecError, match="must be a positive integer"):
            RunOptions(**bad)  # type: ignore[arg-type]


# --- transcripts ----------------------------------------------------------------------------------


def _transcript(path: Path) -> bytes:
    with TranscriptWriter(path, context={"spec_sha256": "0" * 64}) as writer:
        writer.append("uniform", {"low": 0.0}, np.zeros(3))
    return path.read_bytes()


def _claiming(raw: bytes, length: int) -> bytes:
    """``raw`` with its context record's payload length replaced by ``length``."""
    start = len(MAGIC)
    (head,) = struct.unpack(">I", raw[start:start + 4])
    offset = start + 4 + head
    return raw[:offset] + struct.pack(">Q", length) + raw[offset + 8:]


@pytest.mark.parametrize("length", [2**62, 2**64 - 1])
def test_a_record_claiming_a_huge_payload_is_refused_without_allocating_it(tmp_path: Path, length: int) -> None:
    forged = tmp_path / "forged.bin"
    forged.write_bytes(_claiming(_transcript(tmp_path / "t.bin"), length))
    for read in (lambda: TranscriptReader(forged), lambda: list(read_records(forged))):  # replay; verify, audit
        with pytest.raises(TranscriptError, match="ends without its end record"):  # was: MemoryError
            read()


def _fake_release_bundle(folder: Path, seal: str) -> Path:
    """A folder with the release's file list (placeholder contents) and valid checksums."""
    folder.mkdir()
    for name in bundle.PUBLIC_FILES:
        (folder / name).write_text("placeholder\n")
    (folder / "config.toml").write_text("[budget]\nbudget = 10.0\n")
    (folder / bundle.SEAL_FILE).write_text(bundle.seal_text(seal))
    bundle_files.write_checksums(folder, bundle.PUBLIC_FILES)
    return folder


def _verify(folder: Path, transcript: Path) -> list[str]:
    return ["verify", str(folder), "--spec", "release.toml", "--data", "data.csv", "--transcript", str(transcript)]


def test_verify_refuses_a_transcript_claiming_a_huge_payload(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    raw = _transcript(tmp_path / "t.bin")
    forged = tmp_path / "forged.bin"
    forged.write_bytes(_claiming(raw, 2**62))
    folder = _fake_release_bundle(tmp_path / "bundle", TranscriptReader(tmp_path / "t.bin").seal)
    _refused(_verify(folder, forged), capsys, "the transcript cannot be trusted", code=EXIT_NOT_VERIFIED)


# --- verify: the bundle's file list -----------------------------------------------------------------


@pytest.mark.parametrize(("edit", "fragment"), [
    ("evil.txt", "evil.txt added"),
    ("-acceptance.md", "acceptance.md missing"),
    ("-SHA256SUMS", "SHA256SUMS missing"),
    (".hidden", ".hidden added"),
])
def test_verify_refuses_a_release_bundle_with_a_file_added_or_removed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: str, fragment: str) -> None:
    folder = _fake_release_bundle(tmp_path / "bundle", "a" * 64)
    if edit.startswith("-"):
        (folder / edit[1:]).unlink()
        if edit != "-SHA256SUMS":
            bundle_files.write_checksums(folder, [n for n in bundle.PUBLIC_FILES if n != edit[1:]])  # and its line
    else:
        (folder / edit).write_text("x\n")
    (tmp_path / "t.bin").write_bytes(b"")
    _refused(_verify(folder, tmp_path / "t.bin"), capsys, fragment, code=EXIT_NOT_VERIFIED)


def _fake_pd_bundle(folder: Path) -> Path:
    from privlab.mechanisms.plausible_deniability.generation_run import BUNDLE_FILES

    folder.mkdir()
    for name in BUNDLE_FILES:
        (folder / name).write_text(f"{name}\n")
    bundle_files.write_checksums(folder, BUNDLE_FILES)
    return folder


def test_verify_knows_a_pd_generate_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _fake_pd_bundle(tmp_path / "pd")
    absent = tmp_path / "no-transcript.bin"  # a pd bundle has none: it is recognised before that is asked for
    _refused(_verify(folder, absent), capsys, "is a privlab pd-generate bundle")
    (folder / "evil.txt").write_text("x\n")
    _refused(_verify(folder, absent), capsys, "files privlab pd-generate writes: evil.txt added",
             code=EXIT_NOT_VERIFIED)
    (folder / "evil.txt").unlink()
    (folder / "summary.json").unlink()
    _refused(_verify(folder, absent), capsys, "summary.json missing", code=EXIT_NOT_VERIFIED)
    (folder / "summary.json").write_text("altered\n")
    _refused(_verify(folder, absent), capsys, "summary.json does not match its SHA256SUMS", code=EXIT_NOT_VERIFIED)


# --- fuzz: mutated bytes of real specs, odd TOML shapes ---------------------------------------------

TOKENS = [b"[", b"]", b"{", b"}", b"[[", b"]]", b"=", b'"', b"'", b'"""', b"\n", b".", b",", b"#", b"\\",
          b"\xff", b"\xc3", b"\x00", b"inf", b"nan", b"-0", b"1e999", b"9" * 40, b"true", b"1979-05-27T07:32:00Z"]


def _fuzz_sources() -> list[tuple[str, bytes]]:
    quickstart = (ROOT / "experiments" / "quickstart.toml").read_text()
    # Without its plausible-deniability study, whose plan check alone takes seconds for some
    # mutated parameters (a budget question, not a parsing one), to keep the test fast.
    cut = re.sub(r"\[\[study\]\][^\[]*\nname = \"plausible_deniability\".*?(?=\n\[\[study\]\])", "", quickstart,
                 flags=re.S)
    assert "pd_generation" not in cut and "pmse_sensitivity" in cut
    return [("quickstart.toml", cut.encode()),
            ("regression.toml", (ROOT / "experiments" / "pmse" / "regression.toml").read_bytes())]


def _mutate(raw: bytes, rng: random.Random) -> bytes:
    data = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        at, op = rng.randrange(len(data) + 1), rng.randrange(6)
        if op == 0 and data:
            data[min(at, len(data) - 1)] = rng.randrange(256)
        elif op == 1:
            data[at:at] = rng.choice(TOKENS)
        elif op == 2:
            del data[at:at + rng.randint(1, 24)]
        elif op == 3:
            source = rng.randrange(len(data) + 1)
            data[at:at] = data[source:source + rng.randint(1, 60)]
        elif op == 4:
            del data[at:]
        else:
            data[at:at] = rng.choice(TOKENS) * rng.randint(2, 400)
    return bytes(data)


def _read_or_refuse(read: Any) -> None:
    try:
        read()
    except PrivlabError as error:
        assert str(error).strip(), f"{type(error).__name__} without a message"


def test_fuzz_spec_bytes(tmp_path: Path) -> None:
    rng = random.Random(20301)
    for name, raw in _fuzz_sources():
        path = tmp_path / name
        for _ in range(125):
            path.write_bytes(_mutate(raw, rng))
            _read_or_refuse(lambda: toml_kind(path))  # what `privlab validate` reads first
            _read_or_refuse(lambda: load_spec(path))


ODD_VALUES: list[Any] = [
    0, -1, 2**63, 1.5, float("nan"), float("inf"), -float("inf"), True, "", "x" * 10_000, "ε\u0000", [], [[]], [1, "a"],
    {}, {"a": {"b": {}}}, [{}], datetime.date(1979, 5, 27), datetime.time(7, 32),
    datetime.datetime(1979, 5, 27, 7, 32, tzinfo=datetime.timezone.utc),
]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in a parsed TOML document (list items by index)."""
    found = [prefix] if prefix else []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        found += _paths(child, (*prefix, key))
    return found


def _replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = dict(document) if isinstance(document, dict) else list(document)
    copy[path[0]] = _replaced(document[path[0]], path[1:], value)
    return copy


def test_fuzz_toml_shapes(tmp_path: Path) -> None:
    rng = random.Random(20302)
    for name, raw in _fuzz_sources():
        document = tomllib.loads(raw.decode())
        paths = _paths(document)
        for _ in range(125):  # one odd value at one place of a real spec
            odd = _replaced(document, rng.choice(paths), rng.choice(ODD_VALUES))
            _read_or_refuse(lambda: parse_spec(odd, source=tmp_path / name))
        for key in ("name", "study", "params", "grid", "tracking", "budget", "execution", "dataset", "bogus"):
            for depth in (1, 2, 40, 3000):  # nested lists and tables in place of a whole table
                nested: Any = 1
                for level in range(depth):
                    nested = [nested] if level % 2 else {"a": nested}
                _read_or_refuse(lambda: parse_spec({**document, key: nested}, source=tmp_path / name))
    path = tmp_path / "shapes.toml"
    for text in [*DEEP.values(), "= 1", "[a]\n[a]", "a = 1\na = 2", "[[study]]\n" * 50, 'study = "x"', "study = [1]",
                 "[[study]]\nname = 1", '[[study]]\nname = "a"\n[[study]]\nname = "a"', "[study]\nname = 1"]:
        path.write_text(SPEC + text + "\n")
        _read_or_refuse(lambda: load_spec(path))


@pytest.mark.parametrize(("setting", "suggestion"), [
    ("params.epsilonn=1", "did you mean 'epsilon'?"), ("repetiions=3", "did you mean 'repetitions'?"),
    ("tracking.experimnt='x'", "did you mean 'experiment'?"), ("budget.epsiln=1", "did you mean 'epsilon'?"),
])
def test_a_key_typo_is_answered_with_the_closest_key(workdir: Path, capsys: pytest.CaptureFixture[str],
                                                     setting: str, suggestion: str) -> None:
    """Issue 46: a typo listed the allowed keys without pointing at the one meant."""
    err = _refused(["validate", "tiny.toml", "--set", setting], capsys, "unknown key(s)")
    assert err.rstrip().endswith(suggestion), err
    err = _refused(["validate", "tiny.toml", "--set", "params.zzz=1"], capsys, "unknown key(s) 'zzz'")
    assert "did you mean" not in err


@pytest.mark.parametrize(("path", "fragment"), [
    ("x" * 600 + ".csv", "a file's path may take 4,095 bytes and each of its names 255"),
    ("/".join(["y" * 200] * 30), "6,029 bytes long"),
    ("data\\u0000.csv", "holds a NUL character"),
])
def test_a_path_no_file_can_have_is_bad_input(workdir: Path, capsys: pytest.CaptureFixture[str], path: str,
                                              fragment: str) -> None:
    """A 600-character dataset path ended in `OSError: File name too long` (a traceback, exit 1)
    while the spec was read; a NUL in one, in `ValueError: embedded null byte`."""
    for setting in (f'dataset={{path = "{path}"}}', f'dataset.path="{path}"'):
        _refused(["validate", "tiny.toml", "--set", setting], capsys, fragment)
    (workdir / "path.toml").write_text(SPEC + f'[dataset]\npath = "{path}"\n')
    _refused(["run", "path.toml", "--serial"], capsys, fragment)
    assert _left(workdir) == ["path.toml", "tiny.toml"]
