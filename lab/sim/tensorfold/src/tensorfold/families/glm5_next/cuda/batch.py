"""Request slots of the GLM-5 "next" family (simulated TensorFold).

``Batcher(n)`` runs up to ``n`` requests at once (``n`` = the slots that fit at
load, not the requested GLM53_TF_BATCH); see ``tensorfold.sim.batchcore``.
"""

from tensorfold.sim.batchcore import Batcher as _Batcher


class Batcher(_Batcher):
    """The kit's batcher: no logprob sink."""
