"""The fake model: a tokenizer, the reply a prompt gets, where it ends, and logprobs.

Text is deterministic gibberish from a small vocabulary, a function of the prompt, the
request's seed and the choice's index (with temperature > 0 and no seed, of a random salt
too, so sampled replies differ as on a real engine). What a client can rely on is the
shape: token counts, finish reasons and the rules of vLLM's sampling parameters below.

Where a reply ends (vLLM's SamplingParams): the model plans `reasoning` tokens, then
``</think>`` and the answer when thinking is on, else only the answer, then EOS. EOS is
not counted; every other token is, reasoning included.
- ``ignore_eos``: EOS does not end the reply; it runs to max_tokens (finish "length").
- ``min_tokens``: EOS cannot come before that many tokens; the model writes on and EOS
  comes at max(planned, min_tokens) tokens.
- ``max_tokens``: a reply that reaches it ends there, finish "length".
"""

import math
import random
import re
import zlib

SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "fi", "gu", "he", "ja", "no")
VOCAB = [first + second for first in SYLLABLES for second in SYLLABLES]  # 256 two-syllable words
VOCAB_SIZE = 151552  # GLM's: token ids of the prompt fall in it
THINK_END = "</think>"
ROLES = ("system", "user", "assistant", "tool", "developer")
SPLIT = re.compile(r"\w+|[^\w\s]")


class PromptError(ValueError):
    def __init__(self, message, param):
        ValueError.__init__(self, message)
        self.param = param


def mix(*parts):
    return zlib.crc32(repr(parts).encode("utf-8"))


def tokenize(text):
    """Token ids of a text: one a word or punctuation mark."""
    return [mix(word) % VOCAB_SIZE for word in SPLIT.findall(text)]


def message_text(message, index):
    if not isinstance(message, dict):
        raise PromptError("messages[%d] must be an object" % index, "messages")
    role = message.get("role")
    if role not in ROLES:
        raise PromptError("messages[%d].role must be one of %s, got %r" % (index, ", ".join(ROLES), role), "messages")
    content = message.get("content")
    if content is None and role == "assistant":
        return role, ""
    if isinstance(content, str):
        return role, content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise PromptError("messages[%d].content: only text parts are simulated" % index, "messages")
            texts.append(part["text"])
        return role, "\n".join(texts)
    raise PromptError("messages[%d].content must be a string or a list of parts" % index, "messages")


def chat_prompt(messages, thinking):
    """Token ids of the chat template applied to the messages (GLM's layout, roughly:
    [gMASK]<sop>, a role token and the text of each message, then <|assistant|>)."""
    if not isinstance(messages, list) or not messages:
        raise PromptError("messages must be a non-empty list", "messages")
    ids = [1, 2]
    for index, message in enumerate(messages):
        role, text = message_text(message, index)
        ids.append(10 + ROLES.index(role))
        ids += tokenize(text)
    ids.append(10 + ROLES.index("assistant"))
    if not thinking:
        ids.append(20)  # the template closes an empty think block when thinking is off
    return ids


def seed_key(prompt_ids, seed, index, temperature):
    """What a reply is a function of."""
    salt = random.getrandbits(32) if seed is None and temperature > 0 else 0
    return mix(len(prompt_ids), zlib.crc32(repr(prompt_ids).encode()), seed, index, salt)


def word(key, position):
    return " " + VOCAB[mix(key, position) % len(VOCAB)]


class Plan(object):
    """The tokens of one reply: [(kind, text)] with kind reasoning, think_end or content,
    and the finish reason when no stop string ends it first."""

    def __init__(self, key, thinking, max_tokens, min_tokens=0, ignore_eos=False):
        self.key = key
        reasoning = 12 + key % 40 if thinking else 0
        answer = 6 + (key >> 8) % 30
        kinds = ["reasoning"] * reasoning + (["think_end"] if thinking else []) + ["content"] * answer
        planned = len(kinds)
        eos = max_tokens + 1 if ignore_eos else max(planned, min_tokens)
        length = min(eos, max_tokens)
        kinds = kinds[:length] + ["content"] * (length - planned)
        self.tokens = [(kind, THINK_END if kind == "think_end" else word(key, position))
                       for position, kind in enumerate(kinds)]
        self.finish = "length" if eos >= max_tokens else "stop"

    def logprob(self, position):
        """The sampled token's logprob: in (-0.7, 0), so it is the most likely token."""
        return -0.001 - (mix(self.key, position, "lp") % 690) / 1000.0

    def top(self, position, count):
        """[(text, logprob)] of the `count` most likely tokens, the sampled one first; the
        others share what probability the sampled one leaves, halving each time."""
        text = self.tokens[position][1]
        chosen = self.logprob(position)
        out = [(text, chosen)] if count > 0 else []
        rest = 1.0 - math.exp(chosen)
        for rank in range(1, count):
            other = VOCAB[mix(self.key, position, rank) % len(VOCAB)]
            out.append((" " + other if " " + other != text else other, math.log(rest * 0.5 ** rank)))
        return out
