"""The benchmark runner's pure helpers (bench/_common.py, the Liftbridge verdict and tables,
the Iggy table, the CLI's broker list) and the soak's mixed load, with fake brokers."""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
import weakref
from pathlib import Path
from typing import Any

import pytest

from bench import iggy as iggy_bench
from bench import iggy_rust, rabbitmq_consume_ab, rabbitmq_publish_ab, soak
from bench import liftbridge as liftbridge_bench
from bench.__main__ import _clients, _run_order, parse_brokers
from bench._common import (
    Measurement,
    Stopwatch,
    cpu_ratios,
    markdown_table,
    median,
    paired_ratios,
    rate_ratios,
    ratio,
    rotated,
    rss_verdict,
    settle_heap,
    summarize,
)

# --- measurements, medians, ratios -------------------------------------------------------


def test_measurement_rate_and_cpu_per_message() -> None:
    m = Measurement(messages=20_000, seconds=2.0, cpu_seconds=0.5, server_cpu_seconds=0.2)
    assert m.rate == 10_000
    assert m.cpu_us == pytest.approx(25.0)
    assert m.server_cpu_us == pytest.approx(10.0)
    assert Measurement(0, 0.0, 0.0).rate == 0.0
    assert Measurement(0, 1.0, 0.1).cpu_us == 0.0
    assert Measurement(10, 1.0, 0.1).server_cpu_us is None


def test_stopwatch_freezes_at_exit() -> None:
    with Stopwatch() as sw:
        time.sleep(0.01)
    first = sw.result(5)
    time.sleep(0.01)
    assert sw.result(5) == first
    assert first.seconds >= 0.01
    assert first.messages == 5


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _garbage_cycle() -> weakref.ref[_Node]:
    """A cycle of two objects nobody refers to, aged into the oldest generation: only a full
    collection frees it."""
    first, second = _Node(), _Node()
    first.other, second.other = second, first
    gc.collect()  # survivors move up a generation each time: two collections reach the oldest
    gc.collect()
    return weakref.ref(first)


def test_stopwatch_starts_on_a_settled_heap() -> None:
    """A cycle left by an earlier client is collected before the clock starts, not inside a
    later client's timed window."""
    gc.disable()  # no automatic collection may free it first
    try:
        alive = _garbage_cycle()
        assert alive() is not None
        settle_heap()
        assert alive() is None
        alive = _garbage_cycle()
        with Stopwatch():
            assert alive() is None
    finally:
        gc.enable()


def test_median_and_ratio() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0]) == 2.5
    assert median([]) is None
    assert ratio(30.0, 10.0) == 3.0
    assert ratio(None, 10.0) is None
    assert ratio(1.0, None) is None
    assert ratio(1.0, 0.0) is None


def test_summarize_takes_medians_and_skips_empty_clients() -> None:
    runs = {
        "a": [
            Measurement(100, 1.0, 0.001),
            Measurement(100, 4.0, 0.003),
            Measurement(100, 2.0, 0.002),
        ],
        "b": [],
    }
    out = summarize(runs)
    assert list(out) == ["a"]
    assert out["a"]["msg_per_s"] == 50.0  # rates 100, 25, 50
    assert out["a"]["cpu_us_per_msg"] == pytest.approx(20.0)
    assert out["a"]["rounds"] == [100.0, 25.0, 50.0]
    assert "server_cpu_us_per_msg" not in out["a"]
    with_server = summarize(
        {"c": [Measurement(10, 1.0, 0.0, 0.001), Measurement(10, 1.0, 0.0, 0.003)]}
    )
    assert with_server["c"]["server_cpu_us_per_msg"] == pytest.approx(200.0)


def test_rate_and_cpu_ratios_are_relative_to_streamwire() -> None:
    rows: dict[str, dict[str, Any]] = {
        "streamwire": {"msg_per_s": 30_000.0, "cpu_us_per_msg": 20.0},
        "peer": {"msg_per_s": 10_000.0, "cpu_us_per_msg": 80.0},
        "broken": {"msg_per_s": 0.0, "cpu_us_per_msg": None},
    }
    assert rate_ratios(rows) == {"peer": 3.0}
    assert cpu_ratios(rows) == {"peer": 4.0}
    assert rate_ratios({"peer": rows["peer"]}) == {}


def test_rotated_starts_each_round_elsewhere() -> None:
    names = ["a", "b", "c"]
    assert rotated(names, 0) == ["a", "b", "c"]
    assert rotated(names, 1) == ["b", "c", "a"]
    assert rotated(names, 4) == ["b", "c", "a"]
    assert rotated([], 3) == []


def test_each_headline_peer_runs_next_to_the_streamwire_call_it_is_held_against() -> None:
    order = _run_order()
    assert sorted(order) == sorted(_clients())  # every client, once

    def after(name: str) -> str:
        return order[(order.index(name) + 1) % len(order)]

    assert after("streamwire") == "raw ceiling"  # send_many against the ceiling
    assert after("java") == "streamwire"  # send_many and next_batch against java
    assert after("streamwire async for") == "java"
    # rotated, the order of each round is a cycle of this one: neighbours stay neighbours
    # but for the one round that starts between them
    rounds = [rotated(order, r) for r in range(len(order))]
    apart = [r for r in rounds if abs(r.index("streamwire") - r.index("raw ceiling")) != 1]
    assert apart == [rotated(order, order.index("raw ceiling"))]


def test_markdown_table_alignment_and_shape() -> None:
    text = markdown_table(["x", "n"], [["a", "1"], ["b", "22"]], right=(1,))
    assert text.splitlines() == ["| x | n |", "|---|---:|", "| a | 1 |", "| b | 22 |"]
    with pytest.raises(ValueError, match="2 cells"):
        markdown_table(["x", "y", "z"], [["a", "b"]])


# --- RSS flatness ------------------------------------------------------------------------


def test_rss_flat_ignores_warm_up_growth() -> None:
    samples = [(0.0, 40.0), (10.0, 55.0), (20.0, 60.0), (30.0, 61.0), (40.0, 61.5), (50.0, 61.2),
               (60.0, 61.8), (70.0, 61.4)]  # fmt: skip
    verdict = rss_verdict(samples, max_growth_mb=5.0)
    assert verdict.flat is True
    assert verdict.growth_mb == pytest.approx(0.3)  # 61.8 - 61.5: the second half starts at t=40
    assert "t=40s" in verdict.reason
    assert verdict.reason.startswith("flat")


def test_rss_growing_in_the_second_half_is_not_flat() -> None:
    samples = [(float(t), 50.0 + 2.0 * t) for t in range(10)]
    verdict = rss_verdict(samples, max_growth_mb=5.0)
    assert verdict.flat is False
    assert verdict.growth_mb == pytest.approx(8.0)  # t=5..9: 60 -> 68
    assert verdict.slope_mb_per_min == pytest.approx(120.0)
    assert "NOT flat" in verdict.reason


def test_rss_shrinking_is_flat_and_too_few_samples_is_inconclusive() -> None:
    shrinking = [(float(t), 80.0 - t) for t in range(8)]
    assert rss_verdict(shrinking).flat is True
    few = rss_verdict([(0.0, 10.0), (1.0, 90.0), (2.0, 91.0)], min_samples=4)
    assert few.flat is None
    assert few.growth_mb is None
    assert "inconclusive" in few.reason


# --- the CLI's broker selection ----------------------------------------------------------


def test_parse_brokers() -> None:
    assert parse_brokers("liftbridge,iggy") == ["liftbridge", "iggy"]
    assert parse_brokers(" Iggy , iggy,rabbitmq ") == ["iggy", "rabbitmq"]
    assert parse_brokers("all") == ["rabbitmq", "liftbridge", "iggy"]
    with pytest.raises(argparse.ArgumentTypeError, match="kafka"):
        parse_brokers("rabbitmq,kafka")
    with pytest.raises(argparse.ArgumentTypeError):
        parse_brokers(",")


# --- Liftbridge verdict and table --------------------------------------------------------


def _row(rate: float, cpu: float = 10.0) -> dict[str, Any]:
    return {"msg_per_s": rate, "cpu_us_per_msg": cpu, "rounds": [rate]}


def test_publish_verdict_against_the_fastest_gufo_mode() -> None:
    publish = {
        "streamwire": _row(30_000),
        "gufo publish_bulk": _row(9_000),
        "gufo publish ×64": _row(11_000),
        "gufo publish": _row(2_000),
    }
    verdict = liftbridge_bench.publish_verdict(publish)
    assert verdict["fastest_gufo"] == "gufo publish ×64"
    assert verdict["ratio"] == pytest.approx(30_000 / 11_000)
    assert verdict["met"] is False  # 2.73x < 3x
    publish["gufo publish ×64"] = _row(9_500)
    assert liftbridge_bench.publish_verdict(publish)["met"] is True  # 30000 / 9500 = 3.16x
    assert liftbridge_bench.publish_verdict({"streamwire": _row(1.0)})["met"] is None


def test_liftbridge_table() -> None:
    publish = {"streamwire": _row(30_000, 31.06), "gufo publish_bulk": _row(10_000, 95.0)}
    consume = {"streamwire": _row(20_000), "gufo": _row(25_000)}
    result = {
        "publish": publish,
        "consume": consume,
        "ratios": {"publish": rate_ratios(publish), "consume": rate_ratios(consume)},
        "cpu_ratios": {"publish": cpu_ratios(publish), "consume": cpu_ratios(consume)},
        "verdict": liftbridge_bench.publish_verdict(publish),
    }
    text = liftbridge_bench.table(result)
    lines = text.splitlines()
    assert lines[2] == "| publish | streamwire | 30,000 | 31.1 | – | – |"
    assert lines[3] == "| publish | gufo publish_bulk | 10,000 | 95.0 | 3.00x | 3.06x |"
    assert lines[5] == "| consume | gufo | 25,000 | 10.0 | 0.80x | 1.00x |"
    assert lines[-2].endswith(
        "= 3.00x, target ≥ 3x: met; client CPU per message 3.06x streamwire's"
    )
    assert lines[-1] == "go-liftbridge: no result to compare"


def test_go_verdict_over_both_transports_and_consuming() -> None:
    publish = {
        "streamwire": _row(90_000),
        "streamwire grpc": _row(30_000),
        "go-liftbridge": _row(60_000),
    }
    consume = {"streamwire": _row(70_000), "go-liftbridge": _row(100_000)}
    verdict = liftbridge_bench.go_verdict(publish, consume)
    assert verdict["publish"] == pytest.approx(1.5)
    assert verdict["publish_grpc"] == pytest.approx(0.5)
    assert verdict["consume"] == pytest.approx(0.7)
    assert verdict["met"] is False
    fast = {"streamwire": _row(200_000), "go-liftbridge": _row(100_000)}
    both = liftbridge_bench.go_verdict(fast, fast)
    assert (both["publish_grpc"], both["met"]) == (None, True)  # what is missing is not judged
    assert liftbridge_bench.go_verdict({}, {})["met"] is None
    line = liftbridge_bench.go_line({"go": verdict, "go_skipped": None})
    assert line == (
        "streamwire ÷ go-liftbridge: publish nats 1.50x, publish grpc 0.50x, consume 0.70x; "
        "target ≥ 1x: NOT met"
    )
    skipped = liftbridge_bench.go_line({"go": None, "go_skipped": "go is not on PATH"})
    assert skipped == "go-liftbridge: skipped (go is not on PATH)"


def test_the_go_peer_is_unavailable_without_go(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import liftbridge_go

    monkeypatch.setattr("shutil.which", lambda name: None)
    liftbridge_go.binary.cache_clear()
    try:
        with pytest.raises(liftbridge_go.GoUnavailable, match="go is not on PATH"):
            liftbridge_go.binary()
    finally:
        liftbridge_go.binary.cache_clear()


def test_iggy_table_names_the_double() -> None:
    send = {
        "streamwire": {**_row(60_000, 8.0), "server_cpu_us_per_msg": 10.0},
        "apache-iggy": {**_row(90_000, 2.0), "server_cpu_us_per_msg": 9.5},
    }
    poll = {"streamwire": _row(50_000, 9.0), "apache-iggy": _row(150_000, 1.0)}
    result = {
        "server": iggy_bench.DOUBLE_LABEL,
        "double": True,
        "send": send,
        "poll": poll,
        "ratios": {"send": {"apache-iggy": 60 / 90}, "poll": {"apache-iggy": 1 / 3}},
        "cpu_ratios": {"send": {"apache-iggy": 0.25}, "poll": {"apache-iggy": 1 / 9}},
    }
    text = iggy_bench.table(result)
    assert "| send | apache-iggy | 90,000 | 2.0 | 9.5 | 0.67x | 0.25x |" in text
    assert "| poll | streamwire | 50,000 | 9.0 | – | – | – |" in text
    assert "not Iggy's throughput" in text


# --- the soak's mixed load ---------------------------------------------------------------


class FakeBroker:
    """A log that ``send`` appends to and ``receive`` reads from."""

    def __init__(self, fail_sends: int = 0, deliver: bool = True) -> None:
        self.stored = 0
        self.read = 0
        self.fail_sends = fail_sends
        self.deliver = deliver

    async def send(self, n: int) -> None:
        await asyncio.sleep(0)
        if self.fail_sends:
            self.fail_sends -= 1
            raise ConnectionError("broker went away")
        self.stored += n

    async def receive(self) -> int:
        await asyncio.sleep(0.001)
        if not self.deliver:
            return 0
        n, self.read = self.stored - self.read, self.stored
        return n


async def test_mixed_load_unpaced_consumes_everything_published() -> None:
    broker = FakeBroker()
    counters = soak.Counters()
    until = time.monotonic() + 0.05
    async with asyncio.timeout(10):
        await soak.mixed_load(broker.send, broker.receive, until=until, rate=0, counters=counters)
    assert counters.published == broker.stored > 0
    assert counters.published % soak.CHUNK == 0
    assert counters.consumed == counters.published
    assert counters.errors == 0


async def test_mixed_load_paces_publishing() -> None:
    broker = FakeBroker()
    counters = soak.Counters()
    started = time.monotonic()
    async with asyncio.timeout(10):
        await soak.mixed_load(
            broker.send, broker.receive, until=started + 0.2, rate=1_000, counters=counters
        )
    producing_time = 0.2
    assert 0 < counters.published <= 1_000 * producing_time + 1
    assert counters.consumed == counters.published


async def test_mixed_load_counts_failures_and_keeps_going(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(soak, "RETRY_PAUSE", 0.001)
    broker = FakeBroker(fail_sends=2)
    counters = soak.Counters()
    async with asyncio.timeout(10):
        await soak.mixed_load(
            broker.send, broker.receive, until=time.monotonic() + 0.05, rate=0, counters=counters
        )
    assert counters.errors == 2
    assert counters.last_error == "ConnectionError: broker went away"
    assert counters.published > 0
    assert counters.consumed == counters.published


async def test_mixed_load_drain_gives_up_when_nothing_arrives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(soak, "DRAIN_IDLE", 0.05)
    broker = FakeBroker(deliver=False)
    counters = soak.Counters()
    async with asyncio.timeout(10):
        await soak.mixed_load(
            broker.send, broker.receive, until=time.monotonic() + 0.02, rate=0, counters=counters
        )
    assert counters.published > 0
    assert counters.consumed == 0


def test_paired_ratios_divide_within_each_round() -> None:
    def m(rate: float) -> Measurement:
        return Measurement(messages=1000, seconds=1000 / rate, cpu_seconds=0.001)

    rounds = [
        {"sw": m(900), "raw": m(1000)},
        {"sw": m(400), "raw": m(500)},  # a slow round: both slower, the ratio holds
        {"sw": m(300)},  # the peer failed in this round: left out
        {"sw": m(100), "raw": Measurement(0, 0.0, 0.0)},  # a peer that timed nothing
    ]
    assert paired_ratios(rounds, "sw", "raw") == pytest.approx([0.9, 0.8])
    assert paired_ratios(rounds, "raw", "sw") == pytest.approx([1 / 0.9, 1.25])
    assert paired_ratios(rounds, "sw", "absent") == []


def test_the_fresh_process_ab_table() -> None:
    def m(rate: float, cpu_us: float) -> Measurement:
        return Measurement(messages=10, seconds=10 / rate, cpu_seconds=cpu_us * 10 / 1e6)

    futures = "streamwire futures"
    rounds = [
        {"streamwire": m(900, 0.3), "raw ceiling": m(1000, 0.4), futures: m(810, 0.5)},
        {"streamwire": m(600, 0.5), "raw ceiling": m(500, 0.4), futures: m(600, 0.6)},
        {"streamwire": m(300, 0.4), "raw ceiling": m(600, 0.4)},
        {futures: m(100, 0.7)},  # its send_many failed in this round: no pair
    ]
    lines = rabbitmq_publish_ab.report(rounds).splitlines()
    assert lines[2] == "| streamwire | 600 | 0.400 | 0.90x | 0.50x – 1.20x | – |"
    assert lines[3] == "| raw ceiling | 600 | 0.400 | – | – | – |"
    # send_batch against the raw ceiling (0.81x, 1.20x) and against send_many (0.90x, 1.00x)
    assert (
        lines[4]
        == "| streamwire futures | 600 | 0.600 | 1.00x | 0.81x – 1.20x | 0.95x (0.90x – 1.00x) |"
    )


def test_the_fresh_process_consume_ab_table_pairs_each_iterator_with_its_batches() -> None:
    def m(rate: float, cpu_us: float) -> Measurement:
        return Measurement(messages=10, seconds=10 / rate, cpu_seconds=cpu_us * 10 / 1e6)

    rounds = [
        {"next_batch": m(1e6, 0.3), "async for": m(0.9e6, 0.4), "async for (base)": m(0.5e6, 1)},
        {"next_batch": m(2e6, 0.5), "async for": m(2.2e6, 0.2), "next_batch (base)": m(1e6, 1)},
        {"next_batch": m(3e6, 0.4), "async for": m(1.5e6, 0.3)},
    ]
    lines = rabbitmq_consume_ab.report(rounds).splitlines()
    assert lines[2] == "| next_batch | 2,000,000 | 1.00 – 3.00 | 0.400 | 0.300 – 0.500 | – | – |"
    assert lines[3] == (
        "| async for | 1,500,000 | 0.90 – 2.20 | 0.300 | 0.200 – 0.400 | 0.90x | 0.50x – 1.10x |"
    )
    # the base tree's iterator is compared with the base tree's batches only (none here)
    assert (
        lines[4] == "| async for (base) | 500,000 | 0.50 – 0.50 | 1.000 | 1.000 – 1.000 | – | – |"
    )
    assert (
        lines[5]
        == "| next_batch (base) | 1,000,000 | 1.00 – 1.00 | 1.000 | 1.000 – 1.000 | – | – |"
    )


# --- the headline and the plots ----------------------------------------------------------


def _headline_report() -> dict[str, Any]:
    return {
        "core": "native",
        "rabbitmq": {
            "100": {
                "publish": {
                    "streamwire": 900_000.0,
                    "streamwire futures": 500_000.0,
                    "rbfly": 600_000.0,
                    "java": 800_000.0,
                    "raw ceiling": 1_000_000.0,
                },
                "consume": {"streamwire": 700_000.0, "java": 1_400_000.0, "rstream": 90_000.0},
                "publish_cpu_us": {"streamwire": 0.5, "rbfly": 1.0, "raw ceiling": 0.4},
                "consume_cpu_us": {"streamwire": 0.8, "rstream": 9.0},
            }
        },
        "liftbridge": {
            "size": 256,
            "publish": {
                "streamwire": _row(200_000, 4.0),
                "go-liftbridge": _row(100_000, 6.0),
                "gufo publish_bulk": _row(150_000, 12.0),
            },
            "consume": {"streamwire async for": _row(300_000, 2.0), "gufo": _row(50_000, 20.0)},
        },
        "iggy": {"size": 256, "send": {"streamwire": _row(10, 1.0)}, "poll": {}},
    }


def test_the_headline_sets_each_path_against_its_fastest_peer() -> None:
    from bench.headline import headline

    rows = {(r.broker, r.direction, r.call, r.peer): r for r in headline(_headline_report())}
    # RabbitMQ send_many: against java (the fastest peer; raw is not a peer), and its own
    # row against the raw ceiling with the 0.9x goal
    peer = rows[("rabbitmq", "publish", "send_many", "java")]
    assert peer.ratio == pytest.approx(900 / 800)
    assert peer.met is True
    assert peer.cpu_ratio is None  # java's CPU is not measured: no CPU ratio
    raw = rows[("rabbitmq", "publish", "send_many", "raw ceiling")]
    assert raw.ratio == pytest.approx(0.9)
    assert raw.goal == 0.9
    assert raw.met is True
    assert raw.cpu_ratio == pytest.approx(0.4 / 0.5)
    futures = rows[("rabbitmq", "publish", "send_batch", "java")]
    assert futures.goal is None
    assert futures.met is None
    consume = rows[("rabbitmq", "consume", "next_batch", "java")]
    assert consume.ratio == pytest.approx(0.5)
    assert consume.met is False
    assert consume.size == 100
    assert consume.core == "native"
    # Liftbridge: go-liftbridge and gufo's modes are peers; the fastest one counts
    lb = rows[("liftbridge", "publish", "send_batch (NATS)", "gufo publish_bulk")]
    assert lb.ratio == pytest.approx(200 / 150)
    assert lb.cpu_ratio == pytest.approx(3.0)
    assert lb.size == 256
    assert rows[("liftbridge", "consume", "async for", "gufo")].ratio == pytest.approx(6.0)
    # a path that was not measured is left out; one without a peer result has no ratio
    assert not any(k[:3] == ("liftbridge", "consume", "next_batch") for k in rows)
    iggy = rows[("iggy", "send", "send_many", None)]
    assert iggy.ratio is None
    assert iggy.met is None


def test_the_headline_table_and_json() -> None:
    from bench.headline import headline, headline_table, rows_as_json

    rows = headline(_headline_report())
    text = headline_table(rows)
    assert "| rabbitmq | 100 B | consume | next_batch | 700,000 | 0.80 | java |" in text
    assert "**not met**" in text
    assert "| ≥ 0.9x | met | native |" in text
    as_json = rows_as_json(rows)
    assert len(as_json) == len(rows)
    assert {"broker", "ratio", "met", "peer"} <= set(as_json[0])


def test_the_plots_of_a_run(tmp_path: Path) -> None:
    from bench.__main__ import write_plots

    report = _headline_report()
    report["iggy"] = {
        "double": False,
        "send": {"streamwire": _row(10, 1.0), "apache-iggy": _row(8, 2.0)},
        "poll": {"streamwire": _row(10, 1.0)},
    }
    written = write_plots(report, tmp_path, {}, 5000, 256)
    assert [p.name for p in written] == [
        "bench-rabbitmq.png",
        "bench-liftbridge.png",
        "bench-iggy.png",
        "bench-headline.png",
    ]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_headline_ratio_is_the_median_of_each_rounds_ratio() -> None:
    from bench.headline import headline, headline_table

    report: dict[str, Any] = {
        "core": "pure",
        "iggy": {
            "size": 256,
            "send": {
                # medians 100 and 100 (ratio 1.0), but round by round 0.5, 1.25, 1.2
                "streamwire": {**_row(100, 1.0), "rounds": [50.0, 125.0, 120.0]},
                "apache-iggy": {**_row(100, 2.0), "rounds": [100.0, 100.0, 100.0]},
            },
            "poll": {
                # a failed round: the rounds do not pair, the medians' ratio is used
                "streamwire": {**_row(300, 1.0), "rounds": [300.0, 300.0]},
                "apache-iggy": {**_row(100, 2.0), "rounds": [100.0, 100.0, 100.0]},
            },
        },
    }
    rows = {(r.direction, r.call): r for r in headline(report)}
    send = rows[("send", "send_many")]
    assert send.ratio == pytest.approx(1.2)
    assert send.spread is not None
    assert send.spread[0] == pytest.approx(0.5)
    assert send.spread[1] == pytest.approx(1.25)
    poll = rows[("poll", "next_batch")]
    assert poll.ratio == pytest.approx(3.0)
    assert poll.spread is None
    assert "| 1.20x (0.50–1.25) |" in headline_table(rows.values())


def test_the_six_column_summary_names_every_peer_it_uses() -> None:
    from bench.headline import PEER_SETUPS, headline, summary_table

    rows = headline(_headline_report())
    text = summary_table(rows)
    lines = text.splitlines()
    assert all(line.count("|") == 7 for line in lines)  # six columns
    assert (
        "| RabbitMQ 100 B consume `next_batch` | 700,000 | java | 1,400,000 | **0.50x** | – |"
        in (text)
    )
    assert "| RabbitMQ 100 B publish `send_many` | 900,000 | raw ceiling | 1,000,000 | 0.90x |" in (
        text
    )
    assert "| Liftbridge 256 B publish `send_batch (NATS)` | 200,000 | gufo publish_bulk |" in text
    assert "| 1.33x (1.33–1.33) | 3.00x |" in text  # the rounds pair up: min–max
    assert {r.peer for r in rows if r.peer} <= set(PEER_SETUPS)  # the legend covers them


class _Msg:
    def __init__(self, log: list[int], n: int) -> None:
        self._log, self._n = log, n

    @property
    def value(self) -> bytes:
        self._log.append(self._n)  # the bench reads every value: recorded here
        return b"v"


class _FakeConsumer:
    def __init__(self, total: int, per_batch: int) -> None:
        self.read: list[int] = []
        self._left = list(range(total))
        self._per_batch = per_batch

    def __aiter__(self) -> _FakeConsumer:
        return self

    async def __anext__(self) -> _Msg:
        if not self._left:
            raise StopAsyncIteration
        return _Msg(self.read, self._left.pop(0))

    async def next_batch(self, max_messages: int, timeout: float | None) -> list[_Msg]:
        n = min(max_messages, self._per_batch, len(self._left))
        taken, self._left = self._left[:n], self._left[n:]
        return [_Msg(self.read, i) for i in taken]


async def test_the_consuming_loops_read_every_value_and_stop_at_count() -> None:
    from bench._common import read_batches, read_each

    each = _FakeConsumer(10, 3)
    assert await read_each(each, 7) == 7
    assert each.read == list(range(7))
    batches = _FakeConsumer(10, 3)
    assert await read_batches(batches, 8, 100) == 9  # whole batches: 3 + 3 + 3
    assert batches.read == list(range(9))
    short = _FakeConsumer(2, 5)
    with pytest.raises(RuntimeError, match="stalled after 2"):
        await read_batches(short, 5, 100)


def test_the_jvm_side_by_side_table_pairs_rounds_and_states_guarantees() -> None:
    from bench.spark_jvm import SHAPES, guarantee, table

    def found(mine: list[float], theirs: list[float]) -> dict[str, Any]:
        return {
            "rows_per_s": {"streamwire": mine, "sparkling-rabbit": theirs},
            "cpu_us_per_row": {"streamwire": [2.0, 2.0, 2.0], "sparkling-rabbit": [3.0, 5.0, 4.0]},
        }

    report = {
        "sizes": {
            "100": {
                "batch read, count": found([300.0, 200.0, 100.0], [100.0, 100.0, 100.0]),
                "batch write": found([120.0, 100.0, 150.0], [100.0, 100.0, 100.0]),
            }
        }
    }
    text = table(report)
    row = "| batch read, count, 100 B | 200 | 100 | 2.00x (1.00–3.00) | 2.00 / 4.00 (2.00x) |"
    assert f"{row} – | – | – |" in text
    assert "| batch write, 100 B | 120 | 100 | 1.20x (1.00–1.50) |" in text
    # the broker's ceiling, where the report has it: each side's rate as a share of it
    ceiling = found([120.0, 100.0, 150.0], [100.0, 100.0, 100.0])
    ceiling["rows_per_s"]["broker"] = [200.0, 125.0, 150.0]
    text = table({"sizes": {"1000": {"batch write": ceiling}}})
    assert "| batch write, 1,000 B | 120 | 100 | 1.20x (1.00–1.50) | " in text
    assert "| – | – | 150 (80%; 67%) |" in text
    # the floor receiving the stream, on a read: streamwire's share of it, its lead on the
    # connector (medians of the rounds')
    receiving = found([300.0, 200.0, 100.0], [100.0, 100.0, 100.0])
    receiving["rows_per_s"]["floor, receiving"] = [400.0, 300.0, 200.0]
    read = table({"sizes": {"1000": {"batch read, count": receiving}}})
    assert "| – | 300 (67%; 3.00x) | – |" in read
    # the floor sending the rows, on a write, in the same column
    sending = found([120.0, 100.0, 150.0], [100.0, 100.0, 100.0])
    sending["rows_per_s"]["floor, sending"] = [240.0, 100.0, 200.0]
    write = table({"sizes": {"100": {"batch write": sending}}})
    assert "| – | 200 (75%; 2.00x) | – | exactly-once" in write
    assert "at-least-once (its batch writes have no dedup)" in text
    assert all(guarantee(side, s) == "–" for s in SHAPES if "read" in s for side in ("streamwire",))


def test_the_jvm_side_by_side_needs_the_connectors_jar(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from bench.spark_jvm import JAR_ENV, jar_path

    monkeypatch.delenv(JAR_ENV, raising=False)
    with pytest.raises(SystemExit, match="mvn -pl spark41 -am -DskipTests package"):
        jar_path()
    monkeypatch.setenv(JAR_ENV, str(tmp_path / "missing.jar"))
    with pytest.raises(SystemExit, match="is not a file"):
        jar_path()
    jar = tmp_path / "c.jar"
    jar.write_bytes(b"PK")
    monkeypatch.setenv(JAR_ENV, str(jar))
    assert jar_path() == jar


def test_the_results_section_holds_the_table_the_legend_and_every_peer_used() -> None:
    from bench.headline import PEER_SETUPS
    from bench.page import LEGEND, results_section

    report = {**_headline_report(), "when": "2026-11-29T10:00:00Z", "rounds": 5}
    report["iggy"] = {"double": False, "size": 256, "send": {}, "poll": {}}
    text = results_section(report, iggy_server="0.9.0-edge.5 (apache/iggy 18a159a13626)")
    assert "a real Iggy server, 0.9.0-edge.5 (apache/iggy 18a159a13626)" in text
    assert "`python -m bench --rounds 5`" in text
    assert LEGEND in text
    assert "img/bench-headline.png" in text
    for peer in ("java", "raw ceiling", "gufo publish_bulk", "gufo"):
        assert f"* **{peer}**: {PEER_SETUPS[peer]}." in text
    assert f"* **rstream**: {PEER_SETUPS['rstream']}." in text  # measured, if not fastest
    assert "rbfly" in text
    assert "apache-iggy" not in text.split(LEGEND)[1]  # only the peers the run measured


def test_iggy_bench_rates_come_from_its_results_lines() -> None:
    out = (
        "2026-11-29T12:48:01Z INFO bench_report::prints: Benchmark: Pinned Producer, ...\n"
        "Producers Results: Total throughput: 753.11 MB/s, 2941857 messages/s, average "
        "throughput per Producer: 753.11 MB/s, p50 latency: 0.33 ms\n"
    )
    assert iggy_rust.parse_rate(out, "Producers") == 2941857.0
    with pytest.raises(RuntimeError, match="no Consumers throughput"):
        iggy_rust.parse_rate(out, "Consumers")


def test_iggy_rust_shapes_and_table() -> None:
    shapes = iggy_rust.shapes([16, 256], [1000], [1, 4])
    assert [s.label for s in shapes] == [
        "16 B × 1000, 1 actor",
        "256 B × 1000, 1 actor",
        "16 B × 1000, 4 actors",
        "256 B × 1000, 4 actors",
    ]
    side = {"msg_per_s": 2e6, "cpu_us_per_msg": 0.25, "rounds": [2e6]}
    ratio = {"median": 1.1, "min": 1.0, "max": 1.2}
    row: dict[str, Any] = {"size": 256, "batch": 1000, "actors": 1}
    for name in ("send streamwire", "send rust", "send rust high-level", "poll streamwire"):
        row[name] = side
    row["poll rust"] = {**side, "cpu_us_per_msg": 0.1}
    for key in ("send ratio vs rust", "send ratio vs rust high-level", "poll ratio vs rust"):
        row[key] = ratio
    lines = iggy_rust.table({"shapes": [row]}).splitlines()
    assert len(lines) == 3
    assert lines[2].startswith("| 256 B × 1000, 1 actor | 2.00M | 2.00M | **1.10x** (1.00–1.20)")
    assert lines[2].endswith("| 0.25 / 0.10 |")


def test_spark_cpu_counts_a_standalone_clusters_executors_beside_its_own_tree() -> None:
    """An executor of a standalone cluster is its worker's child, not the bench's: the Spark
    benches' CPU counts it (and what it starts) by the class its JVM runs."""
    import os
    import subprocess
    import sys

    from bench import spark as spark_bench

    burn = "import sys, time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
    # an orphan (its parent exits at once), as far from this process's tree as an executor
    script = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', {burn + 'time.sleep(30)'!r}, "
        f"{spark_bench._EXECUTOR.decode()!r}], stdout=subprocess.DEVNULL, "
        "stderr=subprocess.DEVNULL)\n"
        "print(p.pid)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True)
    pid = int(out.stdout)
    try:
        assert pid in spark_bench._executors()
        assert os.getpid() not in spark_bench._executors()
        deadline = time.monotonic() + 60
        with open(f"/proc/{pid}/stat") as f:
            ticks = f.read().rsplit(")", 1)[1].split()
        while int(ticks[11]) + int(ticks[12]) < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
            with open(f"/proc/{pid}/stat") as f:
                ticks = f.read().rsplit(")", 1)[1].split()
        assert spark_bench._tree_cpu() - time.process_time() >= 0.35
    finally:
        os.kill(pid, 9)


def test_spark_cpu_keeps_what_a_descendant_used_after_it_exits() -> None:
    """A child that ends during a job and is reaped by its parent in the tree takes its CPU
    with it out of the live processes: the count keeps it in the parent's reaped children's
    time."""
    import subprocess
    import sys
    import time

    from bench import spark as spark_bench

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
    before = spark_bench._tree_cpu_each()
    mine = time.process_time()
    # a child that burns CPU in a grandchild it reaps, and is reaped by this process
    script = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {burn!r}])\n"
    subprocess.run([sys.executable, "-c", script], check=True)
    used = spark_bench._cpu_since(before) - (time.process_time() - mine)
    assert used >= 0.45


def test_spark_cpu_of_a_job_is_never_less_than_nothing_when_a_worker_is_stopped() -> None:
    """PySpark's daemon ignores SIGCHLD, so a Python worker it stops leaves no time behind:
    a job's CPU must not lose that worker's whole life (the difference of two sums did: a
    round of the JVM side-by-side read -2.20 µs a row)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from bench import spark as spark_bench

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
    daemon = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
        f"w = subprocess.Popen([sys.executable, '-c', {burn + 'time.sleep(60)'!r}])\n"
        "print(w.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", daemon], stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the worker's CPU, burnt
            with open(f"/proc/{worker}/stat") as f:
                ticks = f.read().rsplit(")", 1)[1].split()
            if int(ticks[11]) + int(ticks[12]) >= 40:
                break
            time.sleep(0.05)
        before = spark_bench._tree_cpu_each()
        total = spark_bench._tree_cpu()
        os.kill(worker, signal.SIGKILL)  # reaped at once, its time discarded
        while os.path.exists(f"/proc/{worker}"):
            time.sleep(0.01)
        assert spark_bench._tree_cpu() - total < -0.3  # what the sums lose
        assert spark_bench._cpu_since(before) >= 0.0
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
