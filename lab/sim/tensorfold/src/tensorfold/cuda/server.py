"""Rank 0's OpenAI-style HTTP server (simulated TensorFold, the kit's build).

The kit does not support ``logprobs``: a request may send it, the answer's
``choices[].logprobs`` is ``null`` (patch 9001 adds ``logprobs_request``). The
``tensorfold`` stats object is sent whole (patch 9004 adds ``response_stats``).
Routes and shapes: ``tensorfold.sim.api``.
"""

from tensorfold.sim import api


class App(api.App):
    """The kit's API."""


def serve(engine, health, host, port):
    return api.serve(App, engine, health, host, port)
