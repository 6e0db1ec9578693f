"""vLLM, simulated for the dgx_spark.glm53 Spark lab (see lab/sim/vllm/README.md).

Keeps the interface a deployment touches - the `vllm serve` command line, the
multi-node multiprocessing rendezvous, the load-time memory check, the log lines and
the OpenAI-compatible HTTP API of rank 0 - with no GPU, no torch and no model.
Standard library only.
"""

from vllm.version import __version__

SIMULATED = True
__all__ = ["__version__", "SIMULATED"]
