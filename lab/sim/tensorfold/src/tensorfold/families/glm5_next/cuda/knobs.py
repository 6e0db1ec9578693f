"""Engine knobs of the GLM-5 "next" family (simulated TensorFold).

``HEADER`` names the integers rank 0 sends rank 1 with every request, in order.
Both ranks must run the same build: a rank that receives a header of another
length fails the request (patch 9001 adds ``logprobs``, hence "both images must
match").
"""

from tensorfold.sim.knobscore import LOAD_TIME, RUNTIME, pack, request_knobs, unpack

__all__ = ["HEADER", "LOAD_TIME", "RUNTIME", "check_header", "header", "request_knobs"]

HEADER = ("key", "prompt", "cached", "positions", "temperature", "reasoning", "answer", "slot", "max_tokens")


def header(values):
    return pack(HEADER, values)


def check_header(fields, rank):
    return unpack(HEADER, fields, rank)
