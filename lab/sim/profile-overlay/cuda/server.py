"""Rank 0's OpenAI-style HTTP server (simulated TensorFold) + patches 9001, 9004.

9001: ``logprobs`` on /v1/chat/completions (``"logprobs": true`` and
``"top_logprobs": 0..20``) and /v1/completions (``"logprobs": N``, 0..20, or
true), answer tokens only, streamed with the content they cover.
9004: the ``tensorfold`` stats object in ``summary`` (default), ``full`` or
``off`` mode: per request ``tensorfold_stats``, server default GLM53_TF_STATS.
"""

import os

from tensorfold.sim import api, model

LOGPROBS_MAX = 20
STATS_SERIES = ("keeps", "depths", "drafters", "arms", "stats")
STATS_MODES = ("summary", "full", "off")


def logprobs_request(body, chat):
    """None when not asked, else the number of alternatives; ValueError on bad input."""
    asked, top = body.get("logprobs"), body.get("top_logprobs")
    if chat:
        if asked is not None and not isinstance(asked, bool):
            raise ValueError("logprobs must be true or false")
        if top is not None and not asked:
            raise ValueError("top_logprobs needs logprobs: true")
        if not asked:
            return None
        value = 0 if top is None else top
    else:
        if asked is None or asked is False:
            return None
        value = 0 if asked is True else asked
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= LOGPROBS_MAX:
        raise ValueError("logprobs: the number of alternatives must be an integer from 0 to %d" % LOGPROBS_MAX)
    return value


def stats_mode(value):
    return value if value in STATS_MODES else "summary"


def response_stats(stats, mode=None):
    """The ``tensorfold`` object for ``mode``; never changes ``stats``."""
    mode = stats_mode(os.environ.get("GLM53_TF_STATS") if mode is None else mode)
    if stats is None or mode == "off":
        return None
    if mode == "full":
        return stats
    return dict((key, value) for key, value in stats.items() if key not in STATS_SERIES)


def _bytes(text):
    return list(text.encode("utf-8"))


class App(api.App):
    """The API with logprobs and the stats summary."""

    def request_extras(self, job, body, kind):
        try:
            job.logprobs = logprobs_request(body, kind == "chat")
        except ValueError as exc:
            raise api.ApiError(400, str(exc), "logprobs")
        mode = body.get("tensorfold_stats")
        if mode is not None and mode not in STATS_MODES:
            raise api.ApiError(400, "tensorfold_stats must be one of %s" % ", ".join(STATS_MODES),
                               "tensorfold_stats")
        job.stats_mode = mode

    def logprobs_object(self, kind, entries, offset):
        if kind == "chat":
            return {"content": [{
                "token": model.token_str(index), "logprob": logprob, "bytes": _bytes(model.token_str(index)),
                "top_logprobs": [{"token": model.token_str(alt), "logprob": value,
                                  "bytes": _bytes(model.token_str(alt))} for alt, value in top],
            } for index, logprob, top in entries]}
        tokens = [model.token_str(index) for index, logprob, top in entries]
        offsets = []
        for token in tokens:
            offsets.append(offset)
            offset += len(token)
        return {"tokens": tokens, "token_logprobs": [logprob for index, logprob, top in entries],
                "top_logprobs": [dict((model.token_str(alt), value) for alt, value in top)
                                 for index, logprob, top in entries],
                "text_offset": offsets}

    def stats_object(self, stats, job):
        return response_stats(stats, job.stats_mode)


def serve(engine, health, host, port):
    return api.serve(App, engine, health, host, port)
