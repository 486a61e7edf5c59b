"""bench/bench_site.py's arithmetic and report, without servers (the bench itself is run by hand: a 3-node cluster
and a PostgreSQL of its own take minutes)."""

from __future__ import annotations

import subprocess

import pytest

from bench.bench_site import Result, Tier, all_at_once, capacity, format_capacity, format_summary, summarize

EVENTS = 1000


def site_run(collector_cpu: float, collector_wall: float, rows_equal: bool | None = True,
             load: float = 2.0) -> Result:
    return Result("4 partitions", EVENTS, load, {
        "publishers": Tier(cpu=0.025, rss_kib=2 * 40 * 1024, wall=0.5),
        "broker": Tier(cpu=0.05, rss_kib=3 * 100 * 1024, wall=collector_wall + 0.5),
        "collectors": Tier(cpu=collector_cpu, rss_kib=4 * 50 * 1024, wall=collector_wall),
        "postgresql": Tier(cpu=0.02, rss_kib=30 * 1024, wall=collector_wall)}, lock_waits=0, lock_samples=10,
        rows_equal=rows_equal)


def test_summary_takes_medians_per_mode_and_tier_and_sums_the_lock_samples() -> None:
    direct = Result("direct", EVENTS, 1.5, {"collectors": Tier(0.03, 100 * 1024, 0.25),
                                           "postgresql": Tier(0.01, 20 * 1024, 0.25)}, 0, 5)
    runs = [direct, site_run(0.1, 0.25, load=3.0), site_run(0.3, 1.0, load=1.0), site_run(0.2, 0.5)]
    [d, site] = summarize(runs)
    assert d == {"mode": "direct", "runs": 1, "events": EVENTS, "events_s": 4000.0,
                 "tiers": {"collectors": {"events_s": 4000.0, "cpu_us": 30.0, "rss_mib": 100.0},
                           "postgresql": {"events_s": 4000.0, "cpu_us": 10.0, "rss_mib": 20.0}},
                 "load": [1.5, 1.5], "lock_waits": 0, "lock_samples": 5, "rows": "n/a"}
    assert site["runs"] == 3 and site["events_s"] == 2000.0  # the median wall, 0.5 s
    assert site["tiers"]["collectors"] == {"events_s": 2000.0, "cpu_us": pytest.approx(200.0), "rss_mib": 200.0}
    assert site["tiers"]["broker"] == {"events_s": 1000.0, "cpu_us": 50.0, "rss_mib": 300.0}
    assert site["tiers"]["publishers"]["cpu_us"] == 25.0
    assert site["load"] == [1.0, 3.0] and site["lock_samples"] == 30 and site["rows"] == "equal"


def test_one_differing_run_marks_the_mode() -> None:
    [row] = summarize([site_run(0.1, 0.5), site_run(0.1, 0.5, rows_equal=False)])
    assert row["rows"] == "DIFFER"


def test_the_table_has_a_line_per_mode_with_every_tier() -> None:
    direct = Result("direct", EVENTS, 1.5, {"collectors": Tier(0.03, 100 * 1024, 0.25),
                                           "postgresql": Tier(0.01, 20 * 1024, 0.25)}, 0, 5)
    lines = format_summary(summarize([direct, site_run(0.2, 0.5)])).splitlines()
    assert len(lines) == 3 and lines[0].split()[:3] == ["mode", "events/s", "publishers"]
    assert lines[1].split() == ["direct", "4,000", "–", "–", "–", "–", "4,000", "30.0", "4,000", "10.0", "120",
                                "1.5-1.5", "0/5", "n/a"]
    assert lines[2].split() == ["4", "partitions", "2,000", "2,000", "25.0", "1,000", "50.0", "2,000", "200.0",
                                "2,000", "20.0", "610", "2.0-2.0", "0/10", "equal"]


def test_capacity_sizes_a_site_from_cpu_per_event() -> None:
    [row] = summarize([site_run(0.1, 0.25)])  # collectors 100 µs/event, PostgreSQL 20, broker 50, publishers 25
    cap = capacity(row, 4, [87_000, 260_000])
    assert cap["measured"] == {"events_s_per_collector": 1000.0, "events_s_per_partition_queue": 1000.0,
                               "events_s_per_collector_core": 10_000.0, "events_s_per_postgresql_core": 50_000.0,
                               "events_s_per_broker_core": 20_000.0, "events_s_per_publisher_core": 40_000.0}
    average, peak = cap["sites"]
    assert average == {"events_s": 87_000, "collectors": 9, "partition_queues": 9, "postgresql_cores": 1.74,
                       "broker_cores": 4.35, "publisher_cores": 2.175}
    assert (peak["collectors"], peak["postgresql_cores"], peak["broker_cores"]) == (26, 5.2, 13.0)
    text = format_capacity(cap)
    assert "1,000 events/s per collector" in text
    assert ("a site of 87,000 events/s: 9 collectors on 9 partition queues, 1.7 PostgreSQL cores, 4.3 broker "
            "cores, 2.2 publisher cores in all") in text


@pytest.mark.parametrize("commands, code", [([["true"], ["true"]], 0), ([["sh", "-c", "exit 3"], ["true"]], 1),
                                            ([["true"], ["sh", "-c", "exit 3"]], 1)])
def test_all_at_once_fails_when_one_command_fails(commands: list[list[str]], code: int) -> None:
    assert subprocess.run(all_at_once(commands), timeout=60).returncode == code


def test_capacity_takes_the_brokers_idle_cpu_off_over_their_wall() -> None:
    [row] = summarize([site_run(0.1, 0.25)])  # broker: 50 µs/event over 0.75 s for 1,000 events
    cap = capacity(row, 4, [100_000], broker_idle=0.04)  # 0.04 CPU-s/s x 0.75 s = 30 µs/event idle
    assert cap["measured"]["events_s_per_broker_core"] == pytest.approx(50_000.0)
    assert cap["sites"][0]["broker_cores"] == pytest.approx(2.0)
    assert row["tiers"]["broker"]["cpu_us"] == 50.0  # the summary itself unchanged
    assert "idle 0.04 CPU-s/s taken off" in format_capacity(cap)
