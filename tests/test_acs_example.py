"""The shipped ACS example (experiments/acs, issue 13): its files are valid, and (slow) its release
runs from the shipped shortlist, replays byte for byte and verifies."""

from __future__ import annotations

from pathlib import Path

import pytest

from privlab.platform.cli import EXIT_OK, main

ACS = Path(__file__).resolve().parents[1] / "experiments" / "acs"


def test_the_example_specs_validate(acs_national: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(ACS / "grid.toml")]) == EXIT_OK
    assert "acs-grid: valid; 128 configuration(s)" in capsys.readouterr().out
    assert main(["validate", str(ACS / "release.toml")]) == EXIT_OK
    assert "valid" in capsys.readouterr().out


@pytest.mark.slow
def test_the_example_releases_replays_and_verifies(acs_national: Path, tmp_path: Path) -> None:
    data = str(acs_national)
    spec = str(ACS / "release.toml")
    assert main(["release", spec, "--data", data, "--out", str(tmp_path / "release")]) == EXIT_OK
    transcript = str(tmp_path / "release" / "private" / "transcript.bin")
    assert main(["release", spec, "--data", data, "--out", str(tmp_path / "replay"), "--replay", transcript]) == EXIT_OK
    public = sorted(p.name for p in (tmp_path / "release").iterdir() if p.is_file())
    assert len(public) == 10
    for name in public:
        assert (tmp_path / "release" / name).read_bytes() == (tmp_path / "replay" / name).read_bytes(), name
    assert main(["verify", str(tmp_path / "release"), "--spec", spec, "--data", data, "--transcript", transcript]) == 0
    header = (tmp_path / "release" / "released.csv").read_text().splitlines()[0]
    assert header == "AGEP,SEX,MSP,HISP,RAC1P,HOUSING_TYPE,OWN_RENT,DENSITY,EDU,PINCP,DPHY,DEYE,DEAR"
