"""The mutation check's own logic (tests/mutations/check.py), without running any mutation."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

CHECK_PATH = Path(__file__).resolve().parent / "mutations" / "check.py"


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("privlab_mutation_check", CHECK_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def _entry(**overrides):
    entry = {
        "id": "m", "file": "code.py", "original": "x = 1 / n", "replacement": "x = 0.5 / n",
        "description": "halved", "tests": ["tests/test_code.py"],
    }
    entry.update(overrides)
    return entry


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    (tmp_path / "code.py").write_text("x = 1 / n\ny = 2 / n\n", encoding="utf-8")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_code.py").write_text("", encoding="utf-8")
    return tmp_path


def test_the_shipped_list_is_valid_and_covers_the_issue_17_survivors(check) -> None:
    mutations = check.load_mutations()
    assert len(mutations) >= 30
    ids = {m.id for m in mutations}
    assert {"acceptance-threshold-doubled", "independent-marginals-sensitivity-1",
            "smooth-histogram-draw-weight-halved"} <= ids
    files = {m.file for m in mutations}
    for expected in ("platform/dp/ledger.py", "platform/dp/composition.py", "platform/dp/secure_sampling.py",
                     "mechanisms/basic/laplace.py", "mechanisms/basic/exponential.py",
                     "mechanisms/acceptance/base.py", "mechanisms/synthesizers/privbayes.py",
                     "mechanisms/selection/private_selection.py", "mechanisms/pmse/mechanism.py"):
        assert expected in files, f"no mutation covers {expected}"


def test_a_valid_entry_parses_and_locates_its_line(check, root: Path) -> None:
    (mutation,) = check.parse_mutations([_entry(original="y = 2 / n", replacement="y = 1 / n")], root=root)
    assert mutation.tests == ("tests/test_code.py",)
    assert mutation.location(root) == "code.py:2"


@pytest.mark.parametrize(("overrides", "message"), [
    ({"original": "z = 3"}, "occurs 0 times"),
    ({"original": " / n"}, "occurs 2 times"),
    ({"replacement": "x = 1 / n"}, "equals the original"),
    ({"file": "missing.py"}, "does not exist"),
    ({"tests": ["tests/test_missing.py"]}, "does not exist"),
    ({"tests": []}, "names no tests"),
    ({"sensitivity": 2}, "unknown keys ['sensitivity']"),
])
def test_a_stale_or_malformed_entry_is_refused(check, root: Path, overrides, message) -> None:
    with pytest.raises(check.MutationListError) as error:
        check.parse_mutations([_entry(**overrides)], root=root)
    assert message in str(error.value)


def test_duplicate_ids_are_refused(check, root: Path) -> None:
    with pytest.raises(check.MutationListError, match="duplicate id"):
        check.parse_mutations([_entry(), _entry(original="y = 2 / n")], root=root)


def test_only_failing_tests_count_as_a_catch(check) -> None:
    assert check.classify(1) == "caught"
    assert check.classify(0) == "survived"
    for code in (2, 3, 4, 5, None):  # interrupted, internal error, usage error, no tests, timeout
        assert check.classify(code) == "error"


def test_the_copy_carries_the_mutation_and_the_shim_points_at_it(check, tmp_path: Path) -> None:
    mutation = next(m for m in check.load_mutations() if m.id == "acceptance-threshold-doubled")
    copy, shim = check.make_copy(tmp_path, mutation)
    mutated = (copy / mutation.file).read_text(encoding="utf-8")
    assert mutation.replacement in mutated and mutation.original not in mutated
    assert mutation.original in (check.REPO / mutation.file).read_text(encoding="utf-8")  # the checkout is untouched
    assert (shim / "privlab" / "platform").resolve() == (copy / "platform").resolve()
    assert (shim / "privlab" / "mechanisms").resolve() == (copy / "mechanisms").resolve()
