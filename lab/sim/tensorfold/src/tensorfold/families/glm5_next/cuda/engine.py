"""The GLM-5 "next" engine (simulated TensorFold): load, slots, generate.

See ``tensorfold.sim.enginecore`` for what is simulated. The kit build stops on
the model's EOS only (patch 9002 adds ``extra_stop``).
"""

from tensorfold.sim.enginecore import Engine as _Engine


class Engine(_Engine):
    """The kit's engine."""
