"""Placeholder overlay of tensorfold.cuda.server: patches 9001 (logprobs) and 9004 (stats summary)."""

LOGPROBS_MAX = 20
STATS_MODES = ("summary", "full", "off")


def logprobs_request(body: dict):
    """(logprobs wanted, top_logprobs) of a chat request; ValueError on bad values."""
    want, top = body.get("logprobs", False), body.get("top_logprobs", 0)
    if not isinstance(want, bool) or not isinstance(top, int) or not 0 <= top <= LOGPROBS_MAX:
        raise ValueError("logprobs")
    return want, top


def response_stats(stats, mode: str = "summary"):
    """The `tensorfold` object of a response in `mode`."""
    if stats is None or mode == "off":
        return None
    return dict(stats)
