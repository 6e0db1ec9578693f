"""Lab stand-in of the recipe's runtime contract check: the pinned vLLM version is installed."""
import sys

import vllm

WANT = "0.1.dev20051+g487ecf187"
if not vllm.__version__.startswith(WANT):
    sys.exit("runtime contract: vllm %s, want %s" % (vllm.__version__, WANT))
print("runtime contract ok: vllm", vllm.__version__)
