"""Engine knobs of the GLM-5 "next" family (simulated TensorFold) + patch 9001.

9001 adds ``logprobs`` (-1 = not asked, else the top count) to the header rank 0
sends rank 1 with every request: a rank of the other build fails the request
with a header mismatch, so both nodes must run the patched image.
"""

from tensorfold.sim.knobscore import LOAD_TIME, RUNTIME, pack, request_knobs, unpack

__all__ = ["HEADER", "LOAD_TIME", "RUNTIME", "check_header", "header", "request_knobs"]

HEADER = ("key", "prompt", "cached", "positions", "temperature", "reasoning", "answer", "slot", "max_tokens",
          "logprobs")


def header(values):
    return pack(HEADER, values)


def check_header(fields, rank):
    return unpack(HEADER, fields, rank)
