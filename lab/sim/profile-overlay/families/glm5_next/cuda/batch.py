"""Request slots of the GLM-5 "next" family (simulated TensorFold) + patch 9001.

9001 gives the batcher a per-job logprob sink: the rows of the jobs that asked
go there, and a failed logprob round fails only those jobs.
"""

from tensorfold.sim.batchcore import Batcher as _Batcher


class Batcher(_Batcher):
    """The batcher with ``lp_sink``."""

    def lp_sink(self, job, rows):
        if job.logprobs is None:
            raise RuntimeError("logprob rows for a request that did not ask for them")
        job.lp_rows = len(rows)
        return rows
