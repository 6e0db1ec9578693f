"""The GLM-5 "next" engine (simulated TensorFold) + patch 9002.

9002 (``extra_stop``): at load, on both ranks, the stop set also gets the
tokens in GLM53_TF_EXTRA_STOP (comma-separated specials, default
``<|assistant|>``; empty turns it off; an unknown token fails the load) and the
``eos_token_id`` values of generation_config.json. It stops GLM writing a fake
next turn after short exact-format replies.
"""

import json
import os

from tensorfold.sim import model
from tensorfold.sim.enginecore import Engine as _Engine


def extra_stop(model_path, spec=None):
    """Token ids to stop on besides EOS."""
    spec = os.environ.get("GLM53_TF_EXTRA_STOP", "<|assistant|>") if spec is None else spec
    ids = set()
    for name in (item.strip() for item in spec.split(",")):
        if not name:
            continue
        if name not in model.SPECIALS:
            raise ValueError("GLM53_TF_EXTRA_STOP: %s is not a special token of this tokenizer" % name)
        ids.add(model.token_id(name))
    try:
        with open(os.path.join(model_path, "generation_config.json")) as handle:
            eos = json.load(handle).get("eos_token_id")
    except (OSError, ValueError, AttributeError):
        eos = None
    ids.update(item for item in (eos if isinstance(eos, list) else [eos]) if isinstance(item, int))
    return ids


class Engine(_Engine):
    """The engine with 9002's extra stop tokens."""

    def stop_ids(self):
        return _Engine.stop_ids(self) | extra_stop(self.args.model_path)
