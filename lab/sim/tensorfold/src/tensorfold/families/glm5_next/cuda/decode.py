"""Decoding of the GLM-5 "next" family (simulated TensorFold).

Each rank scores its half of the vocabulary (``tensorfold.sim.model.half_rows``);
rank 0 merges the halves into the sampled tokens. The kit build has no logprobs:
``logprob_rows`` comes with patch 9001.
"""

from tensorfold.sim.model import half_rows, pick

__all__ = ["decode_rows", "half_rows"]


def decode_rows(rows0, rows1):
    """Sampled token ids, one a position, from both ranks' rows."""
    return [pick(row0, row1) for row0, row1 in zip(rows0, rows1)]
