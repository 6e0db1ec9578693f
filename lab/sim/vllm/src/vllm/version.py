"""The version the simulated build reports: the recipe's pinned vLLM build, marked as
simulated (a role comparing versions sees the difference)."""

__version__ = "0.1.dev20051+g487ecf187.sim"
