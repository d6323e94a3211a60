"""The timing engine's logic, with a fake clock: no dependence on the machine's speed."""

import pytest

from pytest_ortperf.measuring.engine import (
    BLOCK_GROUPS,
    PREEMPTED_BELOW,
    Engine,
    EngineConfig,
    group_sizes,
    keeps_preempted,
    smoke,
)


class FakeClock:
    """A nanosecond clock that only moves when a fake call runs."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def fake_call(clock: FakeClock, durations_ns):
    it = iter(durations_ns)
    calls = []

    def call():
        d = next(it, None)
        clock.now += d if d is not None else calls[-1]
        calls.append(d if d is not None else calls[-1])

    call.calls = calls
    return call


def constant_call(clock: FakeClock, ns: int):
    count = {"n": 0}

    def call():
        clock.now += ns
        count["n"] += 1

    call.count = count
    return call


def test_calibrate_reaches_block_target():
    clock = FakeClock()
    engine = Engine(EngineConfig(block_s=0.02, warmup_s=0.1), clock=clock)
    k = engine.calibrate(constant_call(clock, 5_000))  # 5 us per call
    assert k == 4000  # 4000 calls of 5 us = 20 ms


def test_calibrate_skips_the_cold_first_call():
    clock = FakeClock()
    engine = Engine(EngineConfig(block_s=0.001, warmup_s=0.01), clock=clock)
    call = fake_call(clock, [10_000_000] + [1_000] * 10)
    assert engine.calibrate(call) == 1000


def test_measure_spends_the_budget_and_keeps_raw_samples():
    clock = FakeClock()
    cfg = EngineConfig(budget_s=0.5, block_s=0.01, warmup_s=0.05)
    engine = Engine(cfg, clock=clock)
    call = constant_call(clock, 2_000)
    start = clock.now
    samples = engine.measure(call)
    assert samples.calls_per_block == 5000
    assert len(samples.values) == 50  # 0.5 s of 10 ms blocks
    assert all(v == pytest.approx(2e-6) for v in samples.values)
    measured = (clock.now - start) / 1e9
    assert measured <= cfg.budget_s + cfg.warmup_s + 3 * cfg.block_s


def test_measure_takes_min_blocks_for_slow_calls():
    clock = FakeClock()
    engine = Engine(EngineConfig(budget_s=0.1, min_blocks=5), clock=clock)
    samples = engine.measure(constant_call(clock, 40_000_000))  # 40 ms per call
    assert samples.calls_per_block == 1
    assert len(samples.values) == 5  # the budget alone would end after 3


# --------------------------------------------------------------------------- the hard cap


def test_hard_cap_is_three_budgets_plus_the_warm_up_bound_per_arm():
    config = EngineConfig(budget_s=0.5, warmup_s=0.1)
    assert config.cap_s() == pytest.approx(1.6)
    assert config.cap_s(2) == pytest.approx(1.7)
    # The gate's confirmation at twice the budget has twice the cap (warm-up aside).
    assert Engine(config).scaled(2.0).config.cap_s() == pytest.approx(3.1)


def test_hard_cap_stops_min_blocks_of_slow_calls():
    # A gated run asks for 9 blocks; calls of 30 ms at a 0.05 s budget used to take all 9.
    clock = FakeClock()
    config = EngineConfig(budget_s=0.05, min_blocks=9, warmup_s=0.1)
    call = constant_call(clock, 30_000_000)
    samples = Engine(config, clock=clock).measure(call)
    assert 2 <= len(samples.values) < 9
    assert clock.now / 1e9 <= config.cap_s() + 0.03  # the cap plus the block then running


def test_hard_cap_bounds_a_huge_min_blocks():
    # alpha=1e-300 once asked for ~1000 blocks: 16 s at a 0.05 s budget.
    clock = FakeClock()
    config = EngineConfig(budget_s=0.05, block_s=0.02, min_blocks=1000, warmup_s=0.1)
    samples = Engine(config, clock=clock).measure(constant_call(clock, 1_000))
    assert 2 <= len(samples.values) < 20
    assert clock.now / 1e9 <= config.cap_s() + 2 * config.block_s


def test_hard_cap_ends_an_interleaved_measurement_at_a_round():
    clock = FakeClock()
    config = EngineConfig(budget_s=0.05, min_blocks=9, warmup_s=0.1)
    ref, cand = Engine(config, clock=clock).interleave(
        [constant_call(clock, 50_000_000), constant_call(clock, 60_000_000)]
    )
    assert len(ref.values) == len(cand.values)
    assert 2 <= len(ref.values) < 9
    # Past the cap: at most the two rounds every measurement takes (here both started
    # after it, the calibration of the two slow arms having spent it).
    assert clock.now / 1e9 <= config.cap_s(2) + 2 * (0.05 + 0.06)


def test_a_call_slower_than_the_cap_takes_four_calls():
    # The first (untimed) call, one calibration block of one call, two timed blocks.
    clock = FakeClock()
    config = EngineConfig(budget_s=0.05, min_blocks=9)
    call = constant_call(clock, 10_000_000_000)  # 10 s per call
    samples = Engine(config, clock=clock).measure(call)
    assert samples.values == (10.0, 10.0)
    assert call.count["n"] == 4


def test_a_block_far_longer_than_the_budget_is_capped():
    # block=100 at a 0.05 s budget once took 44 s; the plugin now refuses a block longer
    # than the budget, and the engine itself stops at the cap.
    clock = FakeClock()
    config = EngineConfig(budget_s=0.05, block_s=100.0, min_blocks=9, max_calls_per_block=1000)
    samples = Engine(config, clock=clock).measure(constant_call(clock, 1_000_000))  # 1 ms
    assert samples.calls_per_block == 1000  # blocks of 1 s
    assert len(samples.values) == 2
    assert clock.now / 1e9 <= 4.0  # first call, 1 ms and 1 s calibration blocks, two blocks


def test_a_blocks_sample_is_its_median_group_of_calls():
    # 18 calls of 10 us, one of them held up to 1 ms (an interrupt): nine groups of two, one
    # of them slow. The block's mean call would read 65 us; its median group reads 10 us.
    clock = FakeClock()
    engine = Engine(EngineConfig(), clock=clock)
    call = fake_call(clock, [10_000] * 7 + [1_000_000] + [10_000] * 10)
    assert engine.time_block(call, 18) == pytest.approx(10e-6)
    assert len(call.calls) == 18
    # Fewer calls than groups: single calls, their median.
    call = fake_call(clock, [10_000, 12_000, 500_000, 11_000, 10_000])
    assert engine.time_block(call, 5) == pytest.approx(11e-6)
    # A block of one call is that call.
    assert engine.time_block(fake_call(clock, [700_000]), 1) == pytest.approx(700e-6)


@pytest.mark.parametrize("k", [1, 2, 8, 9, 10, 17, 18, 100, 1_000_003])
def test_group_sizes_split_a_block_evenly(k):
    sizes = group_sizes(k)
    assert sum(sizes) == k and len(sizes) == min(k, BLOCK_GROUPS)
    assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


def test_engine_config_refuses_non_finite_durations():
    for kwargs in ({"budget_s": float("inf")}, {"budget_s": float("nan")}, {"block_s": 1e400}):
        with pytest.raises(ValueError, match="finite"):
            EngineConfig(**kwargs)


class BlockLog(Engine):
    """An engine that logs which call each timed block ran."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.blocks = []

    def time_block(self, call, k):
        self.blocks.append(call.__name__)
        return super().time_block(call, k)


def test_interleave_pairs_rounds_in_abba_order():
    clock = FakeClock()

    def a():
        clock.now += 1_000

    def b():
        clock.now += 1_100

    engine = BlockLog(EngineConfig(budget_s=0.2, block_s=0.01, warmup_s=0.0), clock=clock)
    ref, cand = engine.interleave([a, b])
    assert len(ref.values) == len(cand.values) >= 5
    assert [v / r for r, v in zip(ref.values, cand.values)] == pytest.approx(
        [1.1] * len(ref.values)
    )
    timed = engine.blocks[-2 * len(ref.values) :]
    assert "".join(timed[:8]) == "abbaabba"


def test_interleave_many_arms_shuffles_with_seed():
    clock = FakeClock()
    engine = Engine(EngineConfig(budget_s=0.1, block_s=0.01, warmup_s=0.0), clock=clock)
    out = engine.interleave([constant_call(clock, 1_000 * (i + 1)) for i in range(4)])
    assert len({len(s.values) for s in out}) == 1
    assert [s.values[0] for s in out] == pytest.approx([1e-6, 2e-6, 3e-6, 4e-6])
    with pytest.raises(ValueError, match="at least two"):
        engine.interleave([constant_call(clock, 1)])


def test_smoke_runs_once():
    clock = FakeClock()
    call = constant_call(clock, 3_000)
    samples = smoke(call, clock)
    assert call.count["n"] == 1
    assert samples.values == (3e-6,) and samples.calls_per_block == 1


@pytest.mark.parametrize(
    "kwargs, match",
    [({"budget_s": 0}, "budget"), ({"block_s": -1}, "block"), ({"min_blocks": 1}, "min_blocks")],
)
def test_engine_config_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EngineConfig(**kwargs)


# --------------------------------------------------------------------------- the stop rule


def _asked_rounds(engine, calls):
    """The round counts at which an interleaved measurement asked its stop rule (never
    stopping)."""
    asked = []

    def never(values):
        asked.append(len(values[0]))
        return False

    engine.interleave(calls, should_stop=never)
    return asked


def test_real_and_scripted_engines_ask_the_stop_rule_at_the_same_rounds():
    from pytest_ortperf.gating.rules import min_blocks_for
    from pytest_ortperf.testing import ScriptedEngine

    # A gated run's engine takes at least min_blocks_for(alpha) blocks (9 at alpha 0.01).
    gated = min_blocks_for(0.01)
    clock = FakeClock()
    config = EngineConfig(budget_s=0.06, block_s=0.001, warmup_s=0.0, min_blocks=gated)
    real = Engine(config, clock=clock)
    scripted = ScriptedEngine(interleave=[[[1.0] * 30, [1.0] * 30]])
    assert scripted.min_blocks == gated
    real_asked = _asked_rounds(real, [constant_call(clock, 1_000), constant_call(clock, 1_000)])
    scripted_asked = _asked_rounds(scripted, [lambda: None, lambda: None])
    assert real_asked[:5] == scripted_asked[:5] == [12, 16, 20, 24, 28]


def test_scripted_engine_refuses_arms_of_unequal_length():
    from pytest_ortperf.testing import ScriptedEngine

    engine = ScriptedEngine(interleave=[[[1.0] * 10, [1.0] * 12]])
    with pytest.raises(ValueError, match="differ in length"):
        engine.interleave([lambda: None, lambda: None])


def test_scripted_engine_stops_when_told_and_keeps_the_pairs():
    from pytest_ortperf.testing import ScriptedEngine

    engine = ScriptedEngine(interleave=[[list(range(1, 21)), list(range(101, 121))]])
    ref, cand = engine.interleave(
        [lambda: None, lambda: None], should_stop=lambda values: len(values[0]) >= 12
    )
    assert ref.values == tuple(range(1, 13)) and cand.values == tuple(range(101, 113))
    assert engine.stopped_at == [12]


def test_scripted_engine_scaled_shares_script_and_log():
    from pytest_ortperf.testing import ScriptedEngine

    engine = ScriptedEngine(measure=[[1.0, 1.0], [2.0, 2.0]])
    assert engine.measure(lambda: None).values == (1.0, 1.0)
    confirm = engine.scaled(2.0)
    assert confirm.budget_factor == 2.0 and engine.budget_factor == 1.0
    assert confirm.measure(lambda: None).values == (2.0, 2.0)
    assert engine.log == ["measure", ("scaled", 2.0), "measure"]


def test_both_engines_satisfy_the_timing_engine_protocol():
    # mypy checks this statically (recorder.py takes a TimingEngine); here: at run time,
    # every member the protocol names is there.
    from pytest_ortperf.measuring.engine import TimingEngine
    from pytest_ortperf.testing import ScriptedEngine

    members = [m for m in vars(TimingEngine) if not m.startswith("_")]
    assert set(members) == {"clock", "scaled", "for_providers", "measure", "interleave"}
    for engine in (Engine(), ScriptedEngine()):
        assert all(hasattr(engine, m) for m in members)


# --------------------------------------------------------------------------- preemption


class Machine:
    """A fake wall clock and a fake thread CPU clock. A call advances both; after each
    ``period_ns`` of the thread's CPU time the scheduler gives the core away for
    ``slice_ns``, which advances the wall clock only (at the start of the next call)."""

    def __init__(self, period_ns: int = 0, slice_ns: int = 3_000_000) -> None:
        self.wall = FakeClock()
        self.cpu = FakeClock()
        self.period_ns = period_ns
        self.slice_ns = slice_ns
        self.cpu_reads = 0

    def cpu_clock(self) -> int:
        self.cpu_reads += 1
        return self.cpu.now

    def call(self, ns: int, *, cpu_share: float = 1.0):
        def run():
            period = self.period_ns
            if period and self.cpu.now // period != (self.cpu.now + ns) // period:
                self.wall.now += self.slice_ns
            self.wall.now += ns
            self.cpu.now += round(ns * cpu_share)

        return run

    def engine(self, config: EngineConfig, cls=Engine):
        return cls(config, clock=self.wall, cpu_clock=self.cpu_clock)


class FlagLog(Engine):
    """An engine that logs each timed block's value and preemption flag."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.timed = []

    def timed_block(self, call, k, watch_cpu):
        value, hit = super().timed_block(call, k, watch_cpu)
        self.timed.append((value, hit))
        return value, hit


def test_preempted_blocks_are_dropped_and_counted():
    machine = Machine(period_ns=7_000_000)  # a 3 ms slice lost every 7 ms
    config = EngineConfig(budget_s=0.2, block_s=0.002, warmup_s=0.0)
    engine = machine.engine(config, FlagLog)
    samples = engine.measure(machine.call(10_000))
    flags = [hit for _, hit in engine.timed]
    assert samples.watched and not samples.preempted_kept
    assert 0 < samples.preempted == sum(flags) < len(flags)
    assert samples.blocks == len(flags)
    assert samples.preempted_share == pytest.approx(sum(flags) / len(flags))
    assert samples.values == tuple(v for v, hit in engine.timed if not hit)
    assert samples.values == pytest.approx([10e-6] * len(samples.values))  # clean blocks only
    # A slice lost holds up one group of a block's calls: the block's median group does not
    # show it, and its wall time against its CPU time is what finds it.
    assert all(v == pytest.approx(10e-6) for v, _ in engine.timed)


def test_the_preemption_threshold():
    for share, preempted in ((0.98, 0), (PREEMPTED_BELOW + 0.001, 0), (0.96, 1)):
        machine = Machine()
        engine = machine.engine(EngineConfig(budget_s=0.01, block_s=0.001, warmup_s=0.0))
        samples = engine.measure(machine.call(100_000, cpu_share=share), watch_cpu=True)
        assert bool(samples.preempted) == bool(preempted), share


def test_shorter_blocks_are_preempted_less_often():
    shares = {}
    for block_s in (0.02, 0.002):
        machine = Machine(period_ns=6_000_000)
        config = EngineConfig(budget_s=0.5, block_s=block_s, warmup_s=0.0)
        shares[block_s] = machine.engine(config).measure(machine.call(20_000)).preempted_share
    assert shares[0.02] > 0.9 and shares[0.002] < 0.5


def test_measure_goes_on_until_min_blocks_are_clean():
    # Every other block is preempted; the budget alone would stop after ~5 blocks.
    machine = Machine()
    calls = {"n": 0}

    def call():
        calls["n"] += 1
        machine.wall.now += 1_000_000
        machine.cpu.now += 1_000_000 if (calls["n"] // 2) % 2 else 500_000

    config = EngineConfig(budget_s=0.005, block_s=0.002, min_blocks=6, warmup_s=0.0)
    samples = machine.engine(config).measure(call)
    assert len(samples.values) >= 6 and samples.preempted >= 5
    assert samples.values == pytest.approx([1e-3] * len(samples.values))


def test_interleave_drops_whole_rounds_and_keeps_the_pairs():
    machine = Machine(period_ns=5_000_000)
    config = EngineConfig(budget_s=0.2, block_s=0.001, warmup_s=0.0)
    engine = machine.engine(config, FlagLog)
    ref, cand = engine.interleave([machine.call(1_000), machine.call(1_100)])
    rounds = [a[1] or b[1] for a, b in zip(engine.timed[::2], engine.timed[1::2])]
    assert ref.preempted == cand.preempted == sum(rounds) > 0
    assert len(ref.values) == len(cand.values) == rounds.count(False)
    # A preempted block in either arm drops the round: every kept pair is exact.
    assert [c / r for r, c in zip(ref.values, cand.values)] == pytest.approx(
        [1.1] * len(ref.values)
    )
    assert ref.values == pytest.approx([1e-6] * len(ref.values))


def test_interleave_asks_the_stop_rule_on_clean_rounds():
    machine = Machine(period_ns=3_000_000, slice_ns=1_000_000)
    config = EngineConfig(budget_s=0.5, block_s=0.001, warmup_s=0.0, min_blocks=9)
    seen = []

    def stop(values):
        seen.append([list(v) for v in values])
        return len(values[0]) >= 20

    ref, _ = machine.engine(config).interleave(
        [machine.call(1_000), machine.call(2_000)], should_stop=stop
    )
    assert [len(v[0]) for v in seen] == [12, 16, 20]
    assert all(x == pytest.approx(1e-6) for x in seen[-1][0])
    assert len(ref.values) == 20 and ref.preempted > 0


def test_fallback_keeps_preempted_blocks_at_the_cap():
    # Every block is preempted (the thread gets half the core): rather than nothing, the
    # blocks taken before the cap, with the count saying what they are.
    machine = Machine()
    config = EngineConfig(budget_s=0.02, block_s=0.002, min_blocks=9, warmup_s=0.01)
    samples = machine.engine(config).measure(machine.call(100_000, cpu_share=0.5))
    assert samples.preempted_kept and samples.watched
    assert samples.preempted == len(samples.values) == samples.blocks >= 2
    assert samples.preempted_share == 1.0
    assert machine.wall.now / 1e9 <= config.cap_s() + 2 * config.block_s
    ref, cand = machine.engine(config).interleave(
        [machine.call(100_000, cpu_share=0.5), machine.call(100_000)]
    )
    assert ref.preempted_kept and cand.preempted_kept
    assert ref.preempted == len(ref.values) == len(cand.values) >= 2


def test_preempted_blocks_are_kept_only_where_fewer_than_two_were_clean():
    # One rule for the engine, per_call and the remote interleave (Samples.preempted_kept).
    assert keeps_preempted(rounds=9, dropped=8)
    assert keeps_preempted(rounds=2, dropped=2)
    assert not keeps_preempted(rounds=9, dropped=7)
    assert not keeps_preempted(rounds=1, dropped=0)  # nothing preempted: nothing to keep


def test_watch_cpu_false_keeps_every_block_and_reads_no_cpu_clock():
    machine = Machine(period_ns=7_000_000)
    config = EngineConfig(budget_s=0.1, block_s=0.002, warmup_s=0.0)
    # Calls of 1 ms fill a block in two groups of one call: a lost slice shows in a block.
    samples = machine.engine(config).measure(machine.call(1_000_000), watch_cpu=False)
    assert samples.preempted == 0 and not samples.watched and not samples.preempted_kept
    assert max(samples.values) > 1.5 * 1e-3  # the preempted blocks are in
    ref, _ = machine.engine(config).interleave(
        [machine.call(1_000_000), machine.call(1_000_000)], watch_cpu=False
    )
    assert ref.preempted == 0 and max(ref.values) > 1.5 * 1e-3
    assert machine.cpu_reads == 0


def test_cpu_clock_defaults():
    import time

    assert Engine().cpu_clock is time.thread_time_ns
    clock = FakeClock()
    assert Engine(clock=clock).cpu_clock is clock  # a fake wall clock alone: no preemption
    machine = Machine()
    scaled = machine.engine(EngineConfig()).scaled(2.0)
    assert scaled.clock is machine.wall and scaled.cpu_clock == machine.cpu_clock


def test_real_clocks_see_no_preemption_in_an_idle_loop():
    # Pure computation on this thread: the two clocks agree unless the machine is busy,
    # so only the bookkeeping is asserted.
    def spin():
        sum(range(200))

    samples = Engine(EngineConfig(budget_s=0.05, block_s=0.002, warmup_s=0.01)).measure(spin)
    assert samples.watched
    assert samples.blocks == len(samples.values) + samples.preempted


def test_scripted_engine_scripts_preempted_counts():
    from pytest_ortperf.testing import ScriptedEngine

    engine = ScriptedEngine(
        measure=[[1.0, 1.0]], interleave=[[[1.0] * 3, [2.0] * 3]], preempted=[4, 1]
    )
    first = engine.measure(lambda: None)
    assert first.preempted == 4 and first.watched
    ref, cand = engine.interleave([lambda: None, lambda: None], watch_cpu=True)
    assert ref.preempted == cand.preempted == 1
    unwatched = engine.measure(lambda: None, watch_cpu=False)
    assert unwatched.preempted == 0 and not unwatched.watched
    assert engine.watch_cpu == [True, True, False]
    assert ScriptedEngine(measure=[[1.0]]).measure(lambda: None).preempted == 0


def test_latency_records_carry_the_preempted_count():
    from pytest_ortperf.results import LatencyResult, record_from_dict

    result = LatencyResult("t", "n", "run", (1.0, 2.0, 3.0), 10, True, preempted=2)
    data = result.to_dict()
    assert data["preempted"] == 2 and data["preempted_kept"] is False
    assert record_from_dict(data) == result
    assert result.preempted_share == pytest.approx(0.4)
    old = {k: v for k, v in data.items() if not k.startswith("preempted")}
    assert record_from_dict(old).preempted == 0


@pytest.mark.parametrize(
    "settings, watched",
    [
        ({}, True),
        ({"threads": 2}, False),
        ({"threads": 0}, False),
        ({"spinning": True}, False),
        ({"options": {"intra_op_num_threads": 4}}, False),
    ],
)
def test_recorder_watches_cpu_only_for_one_thread_without_spinning(settings, watched):
    from pytest_ortperf import models
    from pytest_ortperf.measuring.feeds import input_specs, make_feeds
    from pytest_ortperf.measuring.session import OrtSession, watches_cpu
    from pytest_ortperf.recorder import Recorder
    from pytest_ortperf.testing import ScriptedEngine

    model = models.attention(seq=8, dim=8)
    session = OrtSession.create(model, **settings)
    single = OrtSession.create(model)
    assert watches_cpu(session) is watched and watches_cpu(single)
    feeds = make_feeds(input_specs(session.sess), dims={"B": 1}, seed=0)
    engine = ScriptedEngine(interleave=[[[1e-3] * 9, [1e-3] * 9]], preempted=[3])
    recorder = Recorder(test="t", measured=True, engine=engine, user_properties=[])
    both = recorder.compare(single, session, feeds, name="cmp")
    assert engine.watch_cpu == [watched]  # both arms are judged together
    assert both.reference.preempted == both.candidate.preempted == (3 if watched else 0)


def test_stop_rule_looks_thin_out_as_rounds_grow():
    from pytest_ortperf.measuring.engine import asks_stop_rule

    looks = [r for r in range(1, 512) if asks_stop_rule(r, 9)]
    assert looks[:13] == list(range(12, 61, 4))
    assert looks[13:] == [
        *range(64, 128, 8),
        *range(128, 256, 16),
        *range(256, 512, 32),
    ]


def shared_cache_calls(clock: FakeClock, ns: int, cold_ns: int, evict_after: int):
    """Two calls sharing a cache: a call runs ``cold_ns`` longer when the other one ran
    more than ``evict_after`` times since this one last ran (its data evicted)."""
    since = [0, 0]  # calls of the other arm since each arm last ran

    def make(arm: int):
        def call():
            clock.now += ns + (cold_ns if since[arm] > evict_after else 0)
            since[arm] = 0
            since[1 - arm] += 1

        return call

    a, b = make(0), make(1)

    def evict():  # what the stop rule's statistics do to both arms' data
        since[:] = [evict_after + 1, evict_after + 1]

    a.evict = evict
    return a, b


def test_interleave_starts_timing_with_both_arms_warm():
    # The arms warm up in turn: the first sits idle while the second warms (many calls),
    # so its first timed block used to carry a cold call (the checks' first round read 3%
    # low on the attention block). An untimed round each way evens them first.
    clock = FakeClock()
    config = EngineConfig(budget_s=0.05, block_s=0.002, min_blocks=9, warmup_s=0.01)
    a, b = shared_cache_calls(clock, 100_000, 100_000, evict_after=45)  # 20 calls a block
    ref, cand = Engine(config, clock=clock).interleave([a, b])
    assert len(ref.values) >= 9
    assert list(ref.values) == list(cand.values) == pytest.approx([100e-6] * len(ref.values))


def test_interleave_rewarms_the_arms_after_a_look_at_the_stop_rule():
    # The rule's statistics evict both arms' data: the next round's first arm used to time
    # one cold call (in the checks, the round after a look read the ratio 2.5% low).
    clock = FakeClock()
    config = EngineConfig(budget_s=0.2, block_s=0.002, min_blocks=9, warmup_s=0.01)
    a, b = shared_cache_calls(clock, 100_000, 100_000, evict_after=45)  # 20 calls a block
    looks = []

    def look(values):
        looks.append(len(values[0]))
        a.evict()
        return False

    ref, cand = Engine(config, clock=clock).interleave([a, b], should_stop=look)
    assert len(looks) >= 3
    assert list(ref.values) == list(cand.values) == pytest.approx([100e-6] * len(ref.values))
