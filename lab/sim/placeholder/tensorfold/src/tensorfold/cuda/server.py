"""Placeholder of tensorfold.cuda.server (the profile's overlay replaces it)."""
