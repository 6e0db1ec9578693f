"""Health and Prometheus counters of rank 0 (simulated TensorFold) + patch 9003.

9003: ``tensorfold_completion_tokens_total`` advances while a reply streams and
prompt tokens count when the request starts producing; totals are unchanged.
"""

from tensorfold.sim.healthcore import Health as _Health


class Health(_Health):
    """Live token counters."""

    def first_token(self, job):
        _Health.first_token(self, job)
        with self.lock:
            self.totals["prompt_tokens_total"] += job.prompt - job.counted_prompt
            job.counted_prompt = job.prompt

    def tokens(self, job, count):
        _Health.tokens(self, job, count)
        with self.lock:
            self.totals["completion_tokens_total"] += job.completion - job.counted_completion
            job.counted_completion = job.completion
