"""Where a reply ends: the model's EOS, ``ignore_eos`` / ``min_tokens``, ``max_tokens`` and
stop strings (the rules of vLLM's sampling parameters of the same names).

The fake model plans a reply (``model.plan``): reasoning, ``</think>``, the answer and,
on the kit build after a short thinking-off answer, a fake next turn; then it writes EOS
(or a build's extra stop token, patch 9002). Every token counts toward ``max_tokens``,
reasoning included; EOS itself is not counted.

- ``ignore_eos``: EOS and the stop tokens do not end the reply; it runs to ``max_tokens``.
- ``min_tokens``: they cannot end it before that many tokens; the model writes on and
  EOS comes at the first position it may (max(planned, min_tokens) tokens).
- ``max_tokens``: a reply that reaches it ends there, finish ``length``.
- stop strings (answer text only): checked from the token after the first ``min_tokens``
  on, each token against the text it ends (as vLLM's detokenizer), so a match inside the
  first ``min_tokens`` tokens does not count; they end a reply with ``ignore_eos`` too.
"""

from tensorfold.sim import model


def script(key, job, stop_ids):
    """(tokens, finish): [(kind, text or None)] of the reply, None for a sampled token,
    and its finish reason when no stop string ends it first."""
    reasoning, answer = model.plan(key, job.thinking, job.effort)
    leak = 0 if model.token_id("<|assistant|>") in stop_ids else model.fake_turn(key, job.thinking, answer)
    tokens = [("reasoning", None)] * reasoning
    tokens += [("think_end", model.THINK_CLOSE)] if job.thinking else []
    tokens += [("content", None)] * answer
    tokens += [("marker", "")] + [("content", None)] * leak if leak else []
    planned = len(tokens)
    eos = job.max_tokens + 1 if job.ignore_eos else max(planned, job.min_tokens)
    length = min(eos, job.max_tokens)
    tokens = tokens[:length] + [("content", None)] * (length - planned)
    return tokens, "length" if eos >= job.max_tokens else "stop"


def sampled(tokens):
    """How many of ``tokens`` the LM head samples (the rows both ranks compute)."""
    return sum(1 for kind, text in tokens if text is None)


class StopStrings(object):
    """A request's stop strings over its answer text, fed one token at a time."""

    def __init__(self, stops, min_tokens):
        self.stops = [stop for stop in stops if stop]
        self.min_tokens = min_tokens
        self.keep = max([len(stop) for stop in self.stops] or [1]) - 1
        self.tail = ""  # the end of the text so far that a match ending in the next token can start in

    def feed(self, count, text):
        """``text`` is the answer token that makes ``count`` reply tokens. Returns None to
        emit it whole, else the part of it before a stop string (the reply ends)."""
        if not self.stops:
            return None
        window = self.tail + text
        self.tail = window[-self.keep:] if self.keep else ""
        if count <= self.min_tokens:
            return None
        start = len(window) - len(text)
        hits = [window.find(stop, max(start - len(stop) + 1, 0)) for stop in self.stops]
        hits = [hit for hit in hits if hit >= 0]
        if not hits:
            return None
        return window[start:max(min(hits), start)]
