"""The ledger against an oracle that shares none of its code (issue 41, item 3).

Random ledgers, splits, events, caps and spending paths (platform/audit/ledger_property.py):
every spend leaves the ledger within its caps with the event recorded or unchanged with a
refusal, and no total it reports is below dp_accounting's optimistic privacy-loss distribution of
the same run. A bounded number of ledgers in the default suite; 10⁴ in the slow one.
"""

from __future__ import annotations

import pytest

import os

from privlab.platform.audit.ledger_property import check_ledgers, check_ledgers_in_processes


def _assert_sound(cases: int, seed: int, processes: int = 1) -> None:
    report = (check_ledgers(cases, seed=seed) if processes == 1
              else check_ledgers_in_processes(cases, seed=seed, processes=processes))
    assert report.cases == cases
    assert report.under_reporting == []
    assert report.invariant_violations == []
    # The check exercised what it claims to: totals compared, refusals met and survived.
    assert report.totals_checked >= cases and report.refusals > cases // 10


def test_no_path_reports_less_than_the_oracle_bounded() -> None:
    _assert_sound(40, seed=41)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_no_path_reports_less_than_the_oracle_at_ten_thousand_ledgers() -> None:
    _assert_sound(10_000, seed=410, processes=min(4, os.cpu_count() or 1))
