# Lab stand-in of the recipe's GB10 overlay: loaded by every Python process of the image
# (PYTHONPATH). The real one checks the FlashInfer specialisations at import; here it only
# marks that it ran, so a rank's environment shows the overlay is in force.
import os

if os.environ.get("GLM53_GB10_PATCH_DISABLE") != "1":
    os.environ.setdefault("GLM53_GB10_OVERLAY", "lab")
