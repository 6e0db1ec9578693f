"""Simulator internals; the modules named like vLLM's (entrypoints/...) are thin over these."""
