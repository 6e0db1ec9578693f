"""The scheduler: --max-num-seqs sequences run at once, the others wait first come first
served, and each running one is "decoded" on the clock.

A request with n > 1 is n sequences (vLLM V1 fans it out into n child requests), each
taking a slot of its own. A sequence's time: its wait for a slot, then its prompt at
VLLM_SIM_PREFILL_TPS tokens/s, then one token every VLLM_SIM_TOKEN_SECONDS (the clock
paces it: a late wake-up is made up, not added). The KV cache only counts: a running
sequence holds prompt + generated tokens of it (kv_cache_usage_perc); it never limits
admission, because at lab scale it holds millions of tokens.
"""

import collections
import threading
import time

from vllm.sim import env, log, metrics


class Cancelled(Exception):
    """The client went away; the sequence is aborted and its slot freed."""


class Sequence(object):
    """One choice of one request."""

    def __init__(self, prompt_ids, plan, index, stop=(), min_tokens=0):
        self.prompt_ids = prompt_ids
        self.plan = plan
        self.index = index
        self.stop = [item for item in stop if item]
        self.min_tokens = min_tokens
        self.arrival = time.monotonic()
        self.finish = None
        self.stop_reason = None
        self.generated = 0


class Engine(object):
    def __init__(self, config, kv_tokens):
        self.config = config
        self.max_num_seqs = config.max_num_seqs
        self.stats = metrics.Stats(kv_tokens)
        self.cond = threading.Condition(self.stats.lock)
        self.queue = collections.deque()
        self.step = env.token_seconds()
        self.prefill_tps = env.prefill_tps()
        self.logged = (0, 0)  # tokens counted at the last stats line

    # -- slots -------------------------------------------------------------------------
    def acquire(self, seq, gone):
        """Wait for a slot, first come first served; False when the client left meanwhile."""
        with self.cond:
            self.queue.append(seq)
            self.stats.waiting += 1
            while self.queue[0] is not seq or self.stats.running >= self.max_num_seqs:
                if gone():
                    self.queue.remove(seq)
                    self.stats.waiting -= 1
                    self.cond.notify_all()
                    return False
                self.cond.wait(0.1)
            self.queue.popleft()
            self.stats.waiting -= 1
            self.stats.running += 1
            self.stats.queue.observe(time.monotonic() - seq.arrival)
            self.cond.notify_all()
            return True

    def release(self, seq):
        with self.cond:
            self.stats.running -= 1
            self.stats.kv_used -= len(seq.prompt_ids) + seq.generated
            self.cond.notify_all()

    def pause(self, until, gone):
        """Sleep to a point on the clock, checking for the client every 0.1 s."""
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return
            if gone():
                raise Cancelled()
            time.sleep(min(left, 0.1))

    # -- one sequence --------------------------------------------------------------------
    def run(self, seq, emit, gone):
        """Decode one sequence: emit(kind, text, position) for each token. Sets seq.finish
        (stop, length or abort) and, when a stop string ended it, seq.stop_reason."""
        if not self.acquire(seq, gone):
            seq.finish = "abort"
            self.count_finish(seq, None)
            return
        first = last = None
        with self.cond:
            self.stats.kv_used += len(seq.prompt_ids)
        try:
            start = time.monotonic() + len(seq.prompt_ids) / self.prefill_tps
            with self.cond:
                self.stats.prompt_tokens += len(seq.prompt_ids)
            content = ""
            for position, (kind, text) in enumerate(seq.plan.tokens):
                self.pause(start + (position + 1) * self.step, gone)
                now = time.monotonic()
                with self.cond:
                    seq.generated += 1
                    self.stats.kv_used += 1
                    self.stats.generation_tokens += 1
                    if first is None:
                        self.stats.ttft.observe(now - seq.arrival)
                    else:
                        self.stats.itl.observe(now - last)
                first = first or now
                last = now
                if kind == "content" and seq.stop and position + 1 > seq.min_tokens:
                    cut = self.stop_cut(seq, content, text)
                    if cut is not None:
                        if cut:
                            emit(kind, cut, position)
                        seq.finish = "stop"
                        return
                    content += text
                emit(kind, text, position)
            seq.finish = seq.plan.finish
        except Cancelled:
            seq.finish = "abort"
        finally:
            self.release(seq)
            self.count_finish(seq, first)

    @staticmethod
    def stop_cut(seq, before, text):
        """None when no stop string ends in this token, else the part of it before the match
        (vLLM leaves the stop string out of the text and names it in stop_reason)."""
        window = before + text
        for stop in seq.stop:
            found = window.find(stop, max(len(before) - len(stop) + 1, 0))
            if found >= 0:
                seq.stop_reason = stop
                return window[len(before):max(found, len(before))]
        return None

    def count_finish(self, seq, first):
        with self.cond:
            self.stats.success[seq.finish] += 1
            if first is not None:
                self.stats.e2e.observe(time.monotonic() - seq.arrival)

    # -- the periodic stats line ---------------------------------------------------------
    def log_stats(self, interval, stop):
        """vLLM's "Engine 000: Avg prompt throughput ..." line every interval while anything
        happens, and once more when it has gone idle."""
        idle_logged = True
        while not stop.wait(interval):
            with self.cond:
                prompt, generation = self.stats.prompt_tokens, self.stats.generation_tokens
                running, waiting, usage = self.stats.running, self.stats.waiting, self.stats.kv_usage()
            prompt_rate = (prompt - self.logged[0]) / interval
            generation_rate = (generation - self.logged[1]) / interval
            self.logged = (prompt, generation)
            busy = prompt_rate or generation_rate or running or waiting
            if not busy and idle_logged:
                continue
            idle_logged = not busy
            log.info("loggers.py:123", "Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: "
                     "%.1f tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache "
                     "hit rate: 0.0%%" % (prompt_rate, generation_rate, running, waiting, usage * 100), log.API)
