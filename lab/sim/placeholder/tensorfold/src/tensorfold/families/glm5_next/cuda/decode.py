"""Placeholder of tensorfold.families.glm5_next.cuda.decode (the profile's overlay replaces it)."""
