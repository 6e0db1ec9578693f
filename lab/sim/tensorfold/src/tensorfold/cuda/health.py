"""Health and Prometheus counters of rank 0 (kit patch 0150; simulated TensorFold).

The kit build counts a request's prompt and completion tokens when it ends
(patch 9003 counts them live). See ``tensorfold.sim.healthcore``.
"""

from tensorfold.sim.healthcore import Health as _Health


class Health(_Health):
    """The kit's /health and /metrics."""
