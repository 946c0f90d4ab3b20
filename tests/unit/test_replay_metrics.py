"""REPLAY.md's metrics on hand-built replay results, with numbers checked by hand."""
import math

import pytest

from gangmaster.tools.replay.metrics import (across_seeds, consolidated, gang_bucket, measurement_window,
                                             selector_metrics, time_average, without_timing)

from replay_results import outcome, result


def ten_jobs():
    """Ten 1-GPU jobs submitted at 0, 10, ..., 90 s, each 100 s long; job k waits k s."""
    return [outcome(f"j{k}", 10 * k, 10 * k + k, 10 * k + k + 100, 100) for k in range(10)]


def test_window_drops_a_tenth_at_each_end_by_submit_order():
    window = measurement_window([10.0 * k for k in range(10)])
    assert (window.first, window.last, window.jobs, window.start_s, window.end_s) == (1, 9, 8, 10.0, 80.0)
    assert window.describe() == "jobs 2..9 of 10 by submit (middle 80 %), t 10..80 s"
    assert measurement_window([1.0, 2.0], trim=0.0).jobs == 2
    assert measurement_window([]).jobs == 0
    with pytest.raises(ValueError):
        measurement_window([1.0], trim=0.5)


def test_jct_and_queueing_statistics_over_the_window():
    window = measurement_window([10.0 * k for k in range(10)])
    m = selector_metrics(result(ten_jobs(), [0.0], [0]), window, gpus_per_node=8)
    # jobs 1..8: JCT = 100 + k, queueing = k
    assert m["jobs"] == 8 and m["finished"] == 8
    assert m["jct_mean_s"] == 104.5
    assert m["jct_p50_s"] == 104.5
    assert m["jct_p95_s"] == pytest.approx(107.65)
    assert m["jct_p99_s"] == pytest.approx(107.93)
    assert m["queue_mean_s"] == 4.5 and m["queue_p95_s"] == pytest.approx(7.65)
    assert m["queued_share"] == 1.0
    assert m["slowdown_mean"] == pytest.approx(1.045)
    assert m["makespan_s"] == 188.0 - 10.0          # last end (job 8: 80 + 8 + 100) - first submit


def test_unlimited_capacity_gives_jct_equal_to_duration_and_no_queueing():
    jobs = [outcome(f"j{k}", 7 * k, 7 * k, 7 * k + 5 + k, 5 + k) for k in range(20)]
    m = selector_metrics(result(jobs, [0.0], [0]), measurement_window([7.0 * k for k in range(20)], 0.0), 8)
    assert m["queue_mean_s"] == 0.0 and m["queue_p95_s"] == 0.0 and m["queued_share"] == 0.0
    assert m["slowdown_mean"] == 1.0
    assert m["jct_mean_s"] == pytest.approx(sum(5 + k for k in range(20)) / 20)


def test_time_averages_integrate_the_step_function_over_the_window():
    # allocated: 0 until 10, 8 from 10 to 50, 16 from 50 on; capacity 16; window 10..80 s
    window = measurement_window([10.0 * k for k in range(10)])
    r = result(ten_jobs(), [0.0, 10.0, 50.0], [0, 8, 16], hol=[0, 4, 0], queue_length=[0, 2, 1],
               pending=[0, 6, 2])
    m = selector_metrics(r, window, 8)
    assert m["gpu_allocation_mean"] == pytest.approx((8 * 40 + 16 * 30) / 70 / 16)
    assert m["frag_hol_mean"] == pytest.approx(4 * 40 / 70 / 16)
    assert m["queue_length_mean"] == pytest.approx((2 * 40 + 1 * 30) / 70)
    assert m["pending_gpus_mean"] == pytest.approx((6 * 40 + 2 * 30) / 70)


def test_time_average_of_an_instant_is_the_value_then():
    window = measurement_window([5.0], trim=0.0)
    assert time_average(*map(__import__("numpy").array, ([0.0, 4.0], [1, 3])), window) == 3.0


def test_consolidation_counts_multi_gpu_jobs_on_the_fewest_nodes():
    jobs = [
        outcome("a", 0, 0, 10, 10, gpus=4, hosts=("n0",), racks=("r0",)),                 # yes
        outcome("b", 1, 1, 11, 10, gpus=4, hosts=("n0", "n1"), racks=("r0",)),            # no, one rack
        outcome("c", 2, 2, 12, 10, gpus=16, hosts=("n0", "n1"), racks=("r0", "r1")),      # yes (2 = 16/8)
        outcome("d", 3, 3, 13, 10, gpus=12, hosts=("n0", "n1", "n2"), racks=("r0", "r1")),  # no (2 would do)
        outcome("e", 4, 4, 14, 10, gpus=1),                                                # not multi-GPU
        outcome("f", 5, None, None, 10, gpus=2, hosts=(), racks=(), state="unfinished"),  # never started
    ]
    m = selector_metrics(result(jobs, [0.0], [0]), measurement_window([0, 1, 2, 3, 4, 5], 0.0), 8)
    assert m["consolidated_share"] == 0.5 and m["one_rack_share"] == 0.5
    assert m["unfinished"] == 1 and m["finished"] == 5 and m["jobs"] == 6
    assert consolidated(8, 1, 8) and not consolidated(9, 1, 8) and consolidated(9, 2, 8)


def test_groups_by_queue_and_gang_size():
    jobs = [outcome("a", 0, 0, 10, 10, gpus=1, queue="x"), outcome("b", 0, 5, 15, 10, gpus=3, queue="y"),
            outcome("c", 0, 0, 10, 10, gpus=16, hosts=("n0", "n1"), queue="x"),
            outcome("d", 0, None, None, 10, gpus=6, hosts=(), racks=(), queue="y", state="never-fits")]
    m = selector_metrics(result(jobs, [0.0], [0]), measurement_window([0, 0, 0, 0], 0.0), 8)
    assert m["by_queue"] == {"x": {"jobs": 2, "jct_mean_s": 10.0, "queue_mean_s": 0.0, "queue_max_s": 0.0},
                             "y": {"jobs": 2, "jct_mean_s": 15.0, "queue_mean_s": 5.0, "queue_max_s": 5.0}}
    assert list(m["by_gang_size"]) == ["1", "2-4", "5-8", ">8"]
    assert m["by_gang_size"]["2-4"]["queue_max_s"] == 5.0   # the longest wait of a size class: starvation shows
    assert m["by_gang_size"]["5-8"] == {"jobs": 1, "jct_mean_s": None, "queue_mean_s": None, "queue_max_s": None}
    assert m["never_fits"] == 1
    assert [gang_bucket(g) for g in (1, 2, 4, 5, 8, 9, 128)] == ["1", "2-4", "2-4", "5-8", "5-8", ">8", ">8"]


def test_seeds_give_medians_an_iqr_and_each_seeds_figures():
    window = measurement_window([10.0 * k for k in range(10)])
    runs = {}
    for seed, extra in ((0, 0), (1, 10), (2, 40)):
        jobs = [outcome(f"j{k}", 10 * k, 10 * k + extra, 10 * k + extra + 100, 100) for k in range(10)]
        runs[seed] = selector_metrics(result(jobs, [0.0], [0], seed=seed), window, 8)
    merged = across_seeds(runs)
    assert merged["queue_mean_s"] == 10.0 and merged["jct_mean_s"] == 110.0
    assert merged["iqr"]["queue_mean_s"] == [5.0, 25.0]
    assert list(merged["by_seed"]) == ["0", "1", "2"]
    assert merged["by_queue"]["q"]["queue_mean_s"] == 10.0
    assert across_seeds({0: runs[0]}) == runs[0]


def test_without_timing_drops_only_wall_time():
    m = selector_metrics(result(ten_jobs(), [0.0], [0]), measurement_window([10.0 * k for k in range(10)]), 8)
    assert "wall_s" in m and "cost" in m
    kept = without_timing({"selectors": {"x": m}})["selectors"]["x"]
    assert "wall_s" not in kept and "cost" not in kept and kept["jct_mean_s"] == m["jct_mean_s"]
    assert not any(isinstance(v, float) and math.isnan(v) for v in kept.values())
