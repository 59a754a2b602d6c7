"""The progress bar weighs units by their measured cost and reaches 100% only when the run is done."""

from __future__ import annotations

import io

import pytest

from privlab.platform.execution.progress import Progress


def _progress() -> Progress:
    progress = Progress(1030, stream=io.StringIO(), classes={"cheap": 1000, "dear": 30})
    progress.configs_total = 2
    return progress


def test_cheap_units_do_not_make_the_bar_look_almost_done() -> None:
    # Issue 14 item 8: counting units, 1,000 cheap trials of 1,030 showed 97% with "ETA 00:00"
    # while the 30 expensive ones still needed most of the time.
    progress = _progress()
    progress.update(1000, cost_class="cheap", seconds=0.001)  # 1 µs a unit
    progress.update(1, cost_class="dear", seconds=1.0)  # 1 s a unit
    assert progress.fraction_and_remaining(progress.started + 2.0)[0] < 0.05  # (1000 µs + 1 s) of (1000 µs + 30 s)
    progress.update(1, cost_class="dear", seconds=1.0)  # a second batch: the ETA counts "dear" from now on
    fraction, remaining = progress.fraction_and_remaining(progress.started + 4.0)
    assert fraction < 0.1
    assert 40 < remaining < 80  # 28 s of work at the 0.5 s/s observed: about 56 s
    assert "ETA 00:00" not in progress.line(progress.started + 4.0)


def test_the_bar_stays_below_100_percent_until_every_configuration_is_done() -> None:
    progress = _progress()
    progress.update(1000, cost_class="cheap", seconds=0.001)
    progress.update(30, cost_class="dear", seconds=30.0, configs_done=1)
    assert progress.fraction_and_remaining(progress.started + 31.0)[0] == 0.999
    assert "100.0%" not in progress.line(progress.started + 31.0)
    progress.update(configs_done=2)
    assert progress.fraction_and_remaining(progress.started + 31.0)[0] == 1.0
    assert "100.0%" in progress.line(progress.started + 31.0)


def test_the_bar_never_moves_backwards_when_a_cost_is_learnt() -> None:
    progress = _progress()
    progress.update(1000, cost_class="cheap", seconds=0.001)
    before = progress.line(progress.started + 1.0)  # "dear" unmeasured: weighted like "cheap"
    progress.update(1, cost_class="dear", seconds=5.0)  # now known to dominate the work
    after = progress.line(progress.started + 6.0)
    share = [float(text.split("%")[0].split("]")[1]) for text in (before, after)]
    assert share[1] >= share[0]


def test_a_resume_counts_earlier_work_without_inflating_the_rate() -> None:
    progress = _progress()
    progress.resume_from(500, classes={"cheap": 500, "dear": 0})
    progress.update(500, cost_class="cheap", seconds=0.0005)
    progress.update(1, cost_class="dear", seconds=1.0)
    progress.update(1, cost_class="dear", seconds=1.0)
    fraction, remaining = progress.fraction_and_remaining(progress.started + 4.0)
    assert fraction < 0.1 and remaining > 40  # the 500 units done before do not count as speed


def test_a_resume_starts_from_the_costs_earlier_sessions_measured() -> None:
    # Section 6: one cost per study put the ETA of a resumed run at 56 h (every unit priced as a
    # Metropolis simulation) when a few hours were left; each class now keeps its own cost.
    progress = _progress()
    progress.resume_from(0, seconds_per_unit={"cheap": 1e-6, "dear": 1.0})
    progress.update(10, cost_class="cheap", seconds=1e-5)
    fraction, remaining = progress.fraction_and_remaining(progress.started + 1e-5)
    assert fraction < 1e-3
    assert 29 < remaining < 31  # 30 dear units at 1 s each, at the 1 s/s just observed


def test_an_untimed_class_is_shown_as_such_rather_than_guessed_into_the_eta() -> None:
    progress = Progress(20, stream=io.StringIO(), classes={"a": 10, "b": 10})
    progress.update(1, cost_class="a", seconds=1.0)  # a first batch prices the bar, not the ETA
    assert "ETA 00:00 + 2 kind(s) of configuration not yet timed" in progress.line(progress.started + 1.0)
    progress.update(4, cost_class="a", seconds=4.0)
    fraction, remaining = progress.fraction_and_remaining(progress.started + 5.0)
    assert fraction == pytest.approx(5 / 20)  # the bar prices b like a, the dearest timed class
    assert remaining == pytest.approx(5.0)  # a's 5 units left at 1 s/s; b's cost is unknown
    assert "ETA 00:05 + 1 kind(s) of configuration not yet timed" in progress.line(progress.started + 5.0)
    progress.update(1, cost_class="b", seconds=0.01)
    progress.update(4, cost_class="b", seconds=0.04)
    fraction, remaining = progress.fraction_and_remaining(progress.started + 5.05)
    assert fraction == pytest.approx(5.05 / 10.1) and remaining == pytest.approx(5.05)
    assert "not yet timed" not in progress.line(progress.started + 5.05)


def test_a_slow_first_batch_does_not_make_the_eta_explode() -> None:
    # Issue 34 item 7: the first quickstart stalled 27 s at 90.5% while numba compiled the pMSE
    # trees inside the class's first batch, and the ETA jumped to 5:59:40 (the slow batch's cost
    # per unit, then averaged with the real one, priced every unit left).
    progress = Progress(1000, stream=io.StringIO(), classes={"pmse": 1000})
    progress.update(4, cost_class="pmse", seconds=27.0)  # the pilot, compiling: 6.75 s a unit
    assert "ETA 00:00 + 1 kind(s) of configuration not yet timed" in progress.line(progress.started + 27.0)
    progress.update(96, cost_class="pmse", seconds=0.96)  # 10 ms a unit
    fraction, remaining = progress.fraction_and_remaining(progress.started + 28.0)
    assert remaining == pytest.approx(900 * 0.01 / (27.96 / 28.0))  # 9 s of work, one busy worker
    for second in range(29, 36):  # and it stays there
        progress.update(100, cost_class="pmse", seconds=1.0)
        assert progress.fraction_and_remaining(progress.started + second)[1] < 10.0


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_is_redrawn_on_a_timer_while_long_units_run() -> None:
    """Issue 46: the bar was redrawn only when a unit finished, so it sat at
    `75.0% 24/32 units · ETA 00:01` for 16 minutes while grid_pgm's last units ran."""
    import time

    stream = _Terminal()
    progress = Progress(32, stream=stream, classes={"pgm": 32})
    progress.update(24, cost_class="pgm", seconds=24.0, force=True)
    drawn = stream.getvalue().count("\r")
    progress.start_ticking(every=0.02)
    deadline = time.monotonic() + 30.0  # generous under load; two ticks take 0.04 s when idle
    while stream.getvalue().count("\r") < drawn + 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    progress.stop()
    assert stream.getvalue().count("\r") >= drawn + 2  # redrawn with no result coming back
    after = stream.getvalue()
    time.sleep(0.1)
    assert stream.getvalue() == after  # stopped: nothing more is drawn
    quiet = progress.line(progress._last_result + 16 * 60)
    assert "75.0%" in quiet and "last result 16:00 ago" in quiet
    assert "last result" not in progress.line(progress._last_result + 5)


def test_a_disabled_bar_never_ticks() -> None:
    progress = Progress(10, stream=io.StringIO(), enabled=False)
    progress.start_ticking(every=0.01)
    assert progress._ticker is None
    progress.close()
