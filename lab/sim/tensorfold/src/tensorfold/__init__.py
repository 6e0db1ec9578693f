"""TensorFold, simulated for the dgx_spark.glm53 lab (see README.md of the project).

Stands for the kit's vendor/TensorFold (0.3.4, 2f8e514, plus the kit's patches):
same command line, log lines, HTTP API and rank-to-rank behaviour, no GPU and no
model. Standard library only.
"""

__version__ = "0.3.4+sim"
SIMULATED = True
