"""Simulator internals (not part of the real TensorFold layout)."""
