"""Lab placeholder of the TensorFold engine (lab/sim/README.md)."""

__version__ = "0.3.4+lab.placeholder"
