"""Decoding of the GLM-5 "next" family (simulated TensorFold) + patch 9001.

``logprob_rows`` merges the two ranks' halves of the vocabulary: each rank sent
a log-sum-exp and its top candidates (one extra all-gather), rank 0 combines
them into natural-log probabilities over the full vocabulary, from the raw
logits (no temperature, top-k or top-p), all <= 0. The sampled text does not
change when logprobs are asked for.
"""

import math

from tensorfold.sim.model import half_rows, pick

__all__ = ["LP_TOP", "decode_rows", "half_rows", "logprob_rows"]

LP_TOP = 20


def decode_rows(rows0, rows1):
    """Sampled token ids, one a position, from both ranks' rows."""
    return [pick(row0, row1) for row0, row1 in zip(rows0, rows1)]


def _logaddexp(left, right):
    top = max(left, right)
    return top + math.log(math.exp(left - top) + math.exp(right - top))


def logprob_rows(rows0, rows1, top):
    """[(token id, logprob, [(id, logprob), ...top]), ...] a position."""
    top = min(max(int(top), 0), LP_TOP)
    out = []
    for row0, row1 in zip(rows0, rows1):
        lse = _logaddexp(row0[2], row1[2])
        chosen = row0 if row0[1] >= row1[1] else row1
        candidates = sorted(row0[3] + row1[3], key=lambda pair: pair[1], reverse=True)[:top]
        out.append((chosen[0], min(chosen[4] - lse, 0.0),
                    [(index, min(logit - lse, 0.0)) for index, logit in candidates]))
    return out
