"""Each engine's scheduler rules and the benchmark's metrics, on small hand-checkable runs
(planner.sched: pure Python, no store, no GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.errors import PlannerInputError
from planner.sched import simulate
from planner.sched.bench import BENCHES, PERCENTILES, lengths, percentiles
from planner.sched.core import Caps, Sim
from planner.sched.metrics import Shapes, measure, reduced, segment_weights
from planner.sched.sglang import SglangScheduler
from planner.sched.trtllm import TrtllmScheduler
from planner.sched.vllm import VllmScheduler

BIG = 1 << 40


def run(adapter, isl, osl, clients: int, caps: Caps, ranks: int = 1, converge: bool = False):
    return Sim(adapter, caps, clients, ranks, np.asarray(isl), np.asarray(osl), converge).run()


def steps(s, i: int) -> tuple[int, int, int]:
    """(decoding requests, prompt tokens, steps) of segment i."""
    return int(s.batch[i]), int(s.prefill_max[i]), int(s.steps[i])


def test_vllm_mixes_a_prompt_chunk_into_a_decode_step_under_the_budget() -> None:
    # Budget 100: request 0's prompt (150) runs as 100 + 50; request 1's 50 rides beside it,
    # then its last 100 tokens share the next step with request 0's first decode (99 + 1).
    s = run(VllmScheduler(), [150, 150], [4, 4], 2, Caps(100, BIG, BIG))
    assert steps(s, 0) == (0, 100, 1)
    assert steps(s, 1) == (0, 100, 1)
    assert steps(s, 2) == (1, 99, 1)  # a mixed step: one decode token + a prompt chunk
    assert int(s.first[0]) == 1 and int(s.first[1]) == 3
    assert int(s.end[0]) == int(s.first[0]) + 3 - 0 * 1 or s.end[0] > s.first[0]


def test_vllm_waits_for_kv_room_for_the_whole_prompt_and_preempts_the_newest() -> None:
    # KV for 700 tokens: two 300-token prompts start; the third waits at the head of the queue
    # until one ends (its whole prompt must fit), not for one step.
    s = run(VllmScheduler(), [300] * 3, [50] * 3, 3, Caps(10_000, BIG, 700))
    assert s.blocked > 0
    assert int(s.first[2]) > int(s.end[0])
    # Decoding grows KV a token a step: 2 x 300 prompts + growth past 700 preempts request 1
    # (the newest), which is recomputed: its outputs still total 50 and it ends last.
    s = run(VllmScheduler(), [330] * 2, [60] * 2, 2, Caps(10_000, BIG, 700))
    assert int(s.end[1]) > int(s.end[0])
    assert s.prefill_sum.sum() > 2 * 330  # the recompute prefilled again


def test_sglang_runs_a_prefill_only_step_when_admission_allows() -> None:
    # Request 0 decodes; request 1 (a later client) arrives while it does: SGLang's next step
    # is its prefill alone, request 0 does not decode in it.
    s = run(SglangScheduler(), [64, 64, 64], [40, 60, 40], 2, Caps(8192, BIG, BIG))
    prefill_steps = [i for i in range(s.steps.size) if s.prefill_max[i] > 0]
    assert len(prefill_steps) == 2 and all(s.batch[i] == 0 for i in prefill_steps)
    assert s.end[1] > s.first[2]  # request 1 was decoding when request 2 was prefilled
    vllm = run(VllmScheduler(), [64, 64, 64], [40, 60, 40], 2, Caps(8192, BIG, BIG))
    mixed = [i for i in range(vllm.steps.size) if vllm.prefill_max[i] > 0 and vllm.batch[i] > 0]
    assert mixed  # vLLM decodes in the same step as the replacement's prompt


def test_sglang_admits_only_when_every_running_request_can_finish() -> None:
    # 1,000 KV tokens: each request needs 200 + 300 over its life. Two fit side by side;
    # a third would run the pool dry before one of them ends, so it waits.
    s = run(SglangScheduler(), [200] * 3, [300] * 3, 3, Caps(8192, BIG, 1_000))
    assert s.blocked > 0
    assert int(s.first[2]) > int(s.end[0])


def test_sglang_polls_for_new_requests_every_recv_interval_decode_steps() -> None:
    # Request 1 outlives request 0, so request 0's replacement arrives while it decodes.
    outs = [200, 330, 200, 200, 200, 200]
    fast = run(SglangScheduler(), [64] * 6, outs, 2, Caps(8192, BIG, BIG))
    slow = run(SglangScheduler(), [64] * 6, outs, 2, Caps(8192, BIG, BIG, recv_interval=30))
    wait_fast = s_steps(fast, fast.arrive[2:], fast.first[2:])
    wait_slow = s_steps(slow, slow.arrive[2:], slow.first[2:])
    assert wait_fast[0] == 2  # the step in flight, then its prefill
    assert wait_slow[0] > 2 and (wait_slow <= 31).all()  # held until the next poll


def s_steps(s, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Steps from the start of segment ``lo`` to the end of segment ``hi``."""
    cum = np.concatenate([[0], np.cumsum(s.steps)])
    return cum[hi + 1] - cum[lo]


def test_trtllm_guaranteed_no_evict_admits_only_what_fits_to_max_output() -> None:
    # KV for 1,100 tokens: each request reserves its prompt and its maximum output (500);
    # two fit, the third waits for one to end, though its prompt alone would fit.
    s = run(TrtllmScheduler(), [100] * 3, [400] * 3, 3, Caps(8192, BIG, 1_100))
    assert s.blocked > 0
    assert int(s.first[2]) > int(s.end[0])
    v = run(VllmScheduler(), [100] * 3, [400] * 3, 3, Caps(8192, BIG, 1_100))
    assert int(v.first[2]) < int(v.end[0])  # vLLM admits on the prompt and preempts later


def test_trtllm_without_chunking_waits_for_a_step_with_room_for_the_whole_prompt() -> None:
    s = run(TrtllmScheduler(), [600, 600], [10, 10], 2, Caps(1000, BIG, BIG))
    assert steps(s, 0) == (0, 600, 1)  # the second prompt does not fit what is left
    assert steps(s, 1) == (1, 600, 1)  # it runs beside the first's decode


def test_trtllm_batch_waiting_holds_prompts_until_the_timeout() -> None:
    caps = Caps(8192, BIG, BIG, batch_wait_iters=20, batch_wait_ratio=0.9)
    outs = [100, 160, 100, 100]
    held = run(TrtllmScheduler(), [64] * 4, outs, 2, caps)
    free = run(TrtllmScheduler(), [64] * 4, outs, 2, Caps(8192, BIG, BIG))
    # request 2 arrives while request 1 decodes: held 20 steps (its tokens are far from 90%
    # of the budget); without batch waiting it is prefilled after the step in flight
    assert s_steps(free, free.arrive[2:3], free.first[2:3])[0] == 2
    assert s_steps(held, held.arrive[2:3], held.first[2:3])[0] == 2 + 20


def test_queueing_past_the_running_cap_waits_in_ttft_not_in_the_decode_steps() -> None:
    caps = Caps(8192, 4, BIG)  # four run at once, eight clients
    s = run(VllmScheduler(), [128] * 32, [64] * 32, 8, caps)
    assert s.batch.max() <= 4 and s.blocked > 0
    assert s.queued.max() >= 4
    per_tok = s_steps(s, s.first + 1, s.end) / (s.osl - 1)
    assert per_tok.max() == pytest.approx(1.0)  # a running request decodes every step
    wait = s_steps(s, s.arrive, s.first)
    assert wait[8:].mean() > 30  # later requests wait for a running one to end


def test_attention_dp_ranks_each_schedule_their_clients_and_step_together() -> None:
    s = run(VllmScheduler(), [100] * 8, [20] * 8, 4, Caps(8192, BIG, BIG), ranks=2)
    assert s.batch.max() == 2 and s.moe_tokens.max() == 4  # busiest rank 2, every rank 4


def test_benchmark_metrics_follow_the_client_definitions() -> None:
    s = run(VllmScheduler(), [100, 100, 100], [5, 5, 5], 1, Caps(8192, BIG, BIG))
    t = np.arange(1.0, s.steps.size + 1.0)  # step i takes i ms
    got = measure(s, t, request_path_ms=2.0)
    cum = np.concatenate([[0.0], np.cumsum(t * s.steps)])
    ttft = cum[s.first + 1] - cum[s.arrive] + 2.0
    e2el = cum[s.end + 1] - cum[s.arrive] + 2.0
    tpot = (e2el - ttft) / (s.osl - 1)  # TPOT = (latency - TTFT) / (output - 1)
    assert got.ttft_ms == pytest.approx(ttft.mean())
    assert got.tpot_ms == pytest.approx(tpot.mean())
    assert got.percentiles["tpot_ms"]["p90"] == pytest.approx(np.percentile(tpot, 90))
    # the means are linear in the step times: what the fit prices from aggregated shapes
    w = segment_weights(s)
    assert float(w["tpot"] @ t) == pytest.approx(tpot.mean())
    assert float(w["ttft"] @ t) + 2.0 == pytest.approx(ttft.mean())
    shapes, weight = reduced(s, w["tpot"])
    assert isinstance(shapes, Shapes) and weight.sum() == pytest.approx(w["tpot"].sum())


def test_percentiles_are_numpys_over_the_requests_each_simulated_one_stands_for() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 7, 40, 101, 1000):
        values = np.round(rng.normal(50.0, 20.0, n), 1 if n % 2 else 6)  # ties, and none
        for weights in (np.ones(n, dtype=np.int64), rng.integers(1, 5, n)):
            want = np.percentile(np.repeat(values, weights), PERCENTILES)
            got = percentiles(values, weights)
            assert [got[f"p{q}"] for q in PERCENTILES] == want.tolist()  # exactly numpy's
    assert all(np.isnan(v) for v in percentiles(np.array([1.0, np.nan]), np.ones(2)).values())


def test_a_replacement_waits_for_the_step_in_flight_but_an_idle_engine_takes_it_at_once() -> None:
    one = run(VllmScheduler(), [10] * 3, [3] * 3, 1, Caps(8192, BIG, BIG))
    # one client: its next request finds the engine idle, prefilled in the next step
    assert list(one.first) == [0, 3, 6] or all(np.diff(one.first) == np.diff(one.first)[0])
    two = run(VllmScheduler(), [10] * 4, [30, 50, 30, 30], 2, Caps(8192, BIG, BIG))
    i = 2  # sent when request 0 ended; step end[0] + 1 was already in flight
    assert s_steps(two, two.arrive[i:i + 1], two.first[i:i + 1])[0] == 2


def test_steady_state_windows_stand_for_the_rest_and_say_so() -> None:
    caps = Caps(8192, BIG, BIG)
    s = simulate("vllm", "vllm", 256, 64, 0.0, 2000, 8, 1, caps)
    assert s.converged_after is not None and s.simulated < 2000
    assert int(s.weight.sum()) == 2000  # every request of the benchmark is counted
    whole = simulate("vllm", "vllm", 256, 64, 0.0, 2000, 8, 1, caps, converge=False)
    t = 1.0 + 0.01 * whole.batch
    a = measure(s, 1.0 + 0.01 * s.batch, 0.0)
    b = measure(whole, t, 0.0)
    assert a.tpot_ms == pytest.approx(b.tpot_ms, rel=0.01)
    assert a.ttft_ms == pytest.approx(b.ttft_ms, rel=0.05)


def test_each_client_draws_lengths_as_its_random_dataset_does() -> None:
    ins, outs = lengths(BENCHES["inferencex"], 1000, 200, 0.8, 500)
    assert ins.min() >= 800 and ins.max() <= 1000 and abs(ins.mean() - 900) < 5
    assert outs.min() >= 160 and outs.max() <= 200
    assert abs(np.corrcoef(ins, outs)[0, 1]) < 0.1  # drawn independently
    ins, _ = lengths(BENCHES["sglang"], 1000, 200, 0.0, 500)  # [1, L] by default
    assert ins.min() < 20 and ins.max() > 980
    ins, _ = lengths(BENCHES["vllm"], 1000, 200, 0.0, 50)  # a fixed L
    assert set(ins.tolist()) == {1000}


def test_a_request_that_can_never_start_is_one_line() -> None:
    with pytest.raises(PlannerInputError, match="cannot start"):
        run(TrtllmScheduler(), [500], [600], 1, Caps(8192, BIG, 1_000))


def _admits(fcs, wholes, clock, cur, left_c, occ_c) -> bool:
    """SGLang's ``add_one_req_ignore_eos`` walk, written out: sorted by tokens left, the
    free tokens plus those freed before each must exceed its growth to its end."""
    left = [fc - clock for fc in fcs] + [left_c]
    held = [w - x for w, x in zip(wholes, left, strict=False)] + [occ_c]
    states = sorted(zip(left, held, [0] * len(fcs) + [1], strict=True))
    freed = 0
    for i, (tokens_left, occupied, _) in enumerate(states):
        bs = len(states) - i
        if cur + freed - tokens_left * bs <= bs:
            return False
        freed += occupied
    return True


def _summarised_rank(rng, most: int, steps: int):
    """A rank with up to ``most`` decoding requests, its admission summary taken, then up to
    ``steps`` - 1 decode steps run: (the rank, their tokens left when summarised, the steps)."""
    from planner.sched.core import Rank
    from planner.sched.sglang import _Summary

    d = int(rng.integers(0, most))
    r = Rank(0)
    r.clock = int(rng.integers(0, 50))
    left = np.sort(rng.integers(2, 300, d))
    r.fcs, r.wholes = (r.clock + left).tolist(), (left + rng.integers(10, 400, d)).tolist()
    _Summary.of(r)  # summarised at this clock, then decode steps pass
    k = int(rng.integers(0, steps))
    r.clock += k
    return r, left, k


def test_sglang_admission_summary_agrees_with_the_walk_and_its_wait() -> None:
    from planner.sched.core import INF
    from planner.sched.sglang import _Summary

    rng = np.random.default_rng(7)
    for _ in range(300):
        r, left, k = _summarised_rank(rng, 30, 2)
        d = left.size
        cur, left_c, occ_c = int(rng.integers(-200, 4000)) - d * k, int(rng.integers(1, 320)), 50
        got = _Summary.of(r).wait(r.clock, cur, left_c, occ_c)
        assert (got == 0) == _admits(r.fcs, r.wholes, r.clock, cur, left_c, occ_c)
        if 0 < got < INF and d and got < left.min() - k:  # after ``got`` decode steps it fits
            later = r.clock + got
            assert _admits(r.fcs, r.wholes, later, cur - d * got, left_c, occ_c)
            assert not _admits(r.fcs, r.wholes, later - 1, cur - d * (got - 1), left_c, occ_c)


def _walk_wait(fcs, wholes, clock, cur, news) -> int:
    """The walk with several new requests ``news`` ((tokens left, held), the batch so far and
    the candidate), running ones first among equals: 0 when it admits them, INF when a new
    one fails or a running one with no new one after it, else the decode steps until every
    failing running one has gained enough (a token a step per new request after it)."""
    from planner.sched.core import INF

    states = sorted([(fc - clock, w - (fc - clock), 0) for fc, w in zip(fcs, wholes, strict=True)]
                    + [(c, o, 1) for c, o in news], key=lambda s: (s[0], s[2]))  # fmt: skip
    wait, freed = 0, 0
    for i, (tokens_left, occupied, new) in enumerate(states):
        bs = len(states) - i
        margin = cur + freed - (tokens_left + 1) * bs
        if margin <= 0:
            later_new = sum(s[2] for s in states[i + 1:])
            if new or not later_new:
                return INF
            wait = max(wait, int(np.floor(-margin / later_new)) + 1)
        freed += occupied
    return wait


def test_sglang_admission_of_a_batch_agrees_with_the_walk() -> None:
    from planner.sched.sglang import _Summary

    rng = np.random.default_rng(11)
    for _ in range(400):
        r, left, _ = _summarised_rank(rng, 40, 3)
        d = left.size
        m = int(rng.integers(2, 6))
        lefts = rng.integers(1, 320, m).tolist()
        lefts[0] = lefts[-1]  # a tie among the new ones
        if d:  # and one with a running request (the running one walks first)
            lefts[1] = r.fcs[int(rng.integers(0, d))] - r.clock
        held = rng.integers(20, 900, m).tolist()
        cur = int(rng.integers(-200, 9000))
        want = _walk_wait(r.fcs, r.wholes, r.clock, cur, list(zip(lefts, held, strict=True)))
        assert _Summary.of(r).wait_batch(r.clock, cur, lefts, held) == want
