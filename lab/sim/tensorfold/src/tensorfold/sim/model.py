"""The simulated model: a tokenizer, a chat template and deterministic logits.

No weights, no GPU. Text is a function of the prompt tokens, the seed and the
temperature only, so identical requests give identical text (as the kit does
when a request names no seed). The output vocabulary is split in two halves, one
a rank, as tensor parallelism splits the real LM head: each rank computes its
half's logits for every position and the two halves are merged on rank 0 (a
Gumbel-max pick, and for logprobs a log-sum-exp and a top-k), so every completion
needs rank 1's answer over the link.
"""

import hashlib
import math
import random
import re
import zlib

HALF = 256  # output tokens a rank
VOCAB_SIZE = 2 * HALF
EOS = "<|endoftext|>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
ROLES = ("system", "user", "assistant", "tool", "observation")
SPECIALS = ("[gMASK]", "<sop>", EOS, THINK_OPEN, THINK_CLOSE, "<|assistant|>", "<|user|>",
            "<|system|>", "<|observation|>", "<|tool|>", "<|begin_of_image|>", "<|image|>")
SPECIAL_BASE = 151329
_SPECIAL_IDS = dict((name, SPECIAL_BASE + index) for index, name in enumerate(SPECIALS))
IMAGE_TOKENS = 256

_ONSETS = ("b", "c", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou")
_CODAS = ("", "n", "r", "s", "l", "th")


def _build_vocab():
    words = []
    rng = random.Random("tensorfold-sim-vocab-1")
    seen = set()
    while len(words) < VOCAB_SIZE - 8:
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for count in range(rng.choice((1, 1, 2, 2, 3))))
        word += rng.choice(_CODAS)
        if word not in seen:
            seen.add(word)
            words.append(" " + word)
    words += [",", ".", ";", ":", "?", "!", "\n", " -"]
    return tuple(words)


VOCAB = _build_vocab()
_IDS = dict((text, index) for index, text in enumerate(VOCAB))
_PIECE = re.compile(r"\[gMASK\]|<sop>|<\|[a-z_]+\|>|</?think>| ?\w+| ?[^\w\s]|\s+", re.UNICODE)


def token_id(piece):
    if piece in _SPECIAL_IDS:
        return _SPECIAL_IDS[piece]
    if piece in _IDS:
        return _IDS[piece]
    return VOCAB_SIZE + zlib.crc32(piece.encode("utf-8")) % (SPECIAL_BASE - VOCAB_SIZE)


def tokenize(text):
    return [token_id(piece) for piece in _PIECE.findall(text)]


def token_str(index):
    if 0 <= index < VOCAB_SIZE:
        return VOCAB[index]
    for name, special in _SPECIAL_IDS.items():
        if special == index:
            return name
    return "<%d>" % index


class PromptError(ValueError):
    """A request whose messages the template cannot render (HTTP 400)."""

    def __init__(self, message, param="messages"):
        ValueError.__init__(self, message)
        self.param = param


def message_text(content, vision):
    """Text of one message's content, with each image as its placeholder run."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise PromptError("message content must be a string or a list of parts")
    parts = []
    for part in content:
        if not isinstance(part, dict):
            raise PromptError("message content parts must be objects")
        kind = part.get("type")
        if kind in ("text", "input_text"):
            parts.append(str(part.get("text", "")))
        elif kind in ("image_url", "input_image", "image"):
            if not vision:
                raise PromptError("image input is off on this server (GLM53_TF_VISION=0)")
            parts.append("<|begin_of_image|>" + "<|image|>" * IMAGE_TOKENS)
        else:
            raise PromptError("unsupported content part type %r" % (kind,))
    return "".join(parts)


def chat_prompt(messages, thinking, vision=False):
    """The GLM chat template, roughly: what the prompt tokens are counted from."""
    if not isinstance(messages, list) or not messages:
        raise PromptError("messages must be a non-empty list")
    out = ["[gMASK]<sop>"]
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise PromptError("each message needs a role among %s" % ", ".join(ROLES))
        out.append("<|%s|>\n" % message["role"])
        out.append(message_text(message.get("content"), vision))
    out.append("<|assistant|>")
    out.append(THINK_OPEN if thinking else THINK_CLOSE)
    return "".join(out)


def request_key(prompt_ids, seed, temperature_milli):
    """A 62-bit key for the request: the prompt, and the seed if given."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(("%d|%d|" % (seed, temperature_milli)).encode("ascii"))
    digest.update(",".join(str(index) for index in prompt_ids).encode("ascii"))
    return int.from_bytes(digest.digest(), "big") >> 2


EFFORT_SCALE = {"low": 0.5, "high": 1.0, "max": 1.5}


def plan(key, thinking, effort):
    """(reasoning tokens, answer tokens) the model wants to write for this key."""
    reasoning = 0
    if thinking:
        reasoning = int((12 + key % 23) * EFFORT_SCALE.get(effort, 1.0))
    answer = 6 + (key >> 8) % 19
    return reasoning, answer


FAKE_TURN_MAX = 9


def fake_turn(key, thinking, answer):
    """Tokens of a fake next turn GLM writes after a short exact-format reply.

    Thinking off and a short answer: the model goes on with ``<|assistant|>`` and a
    made-up turn instead of EOS, unless ``<|assistant|>`` is a stop token (patch 9002).
    """
    if thinking or answer > 10:
        return 0
    return 4 + (key >> 16) % (FAKE_TURN_MAX - 3)


def full_positions(reasoning, answer):
    """Sampled positions scored by the full LM head: all those of the planned reply.

    Positions past them are written only when EOS is ignored or held off (``ignore_eos``,
    ``min_tokens``); ``half_rows`` scores those with a cheap sampler, so a reply of
    thousands of tokens costs microseconds a token instead of a full half a token.
    """
    return reasoning + answer + FAKE_TURN_MAX


def _gumbel(rng):
    uniform = min(max(rng.random(), 1e-12), 1.0 - 1e-12)
    return -math.log(-math.log(uniform))


def _lse(values):
    top = max(values)
    return top + math.log(sum(math.exp(value - top) for value in values))


def half_rows(key, rank, positions, temperature_milli, top=None, full=None):
    """One rank's share of the LM head for ``positions`` sampled positions.

    Each row: ``[best id, best score]`` (Gumbel-max at the temperature, plain
    argmax when greedy), plus ``lse``, this half's ``top`` ``[id, logit]`` pairs
    and the best id's logit when logprobs were asked for (``top`` not None).
    Positions from ``full`` on (``full_positions``) come from ``_filler_rows``.
    """
    rows = []
    first = rank * HALF
    scored = positions if full is None else min(positions, full)
    for position in range(scored):
        rng = random.Random("%d:%d:%d" % (key, position, rank))
        logits = [rng.gauss(0.0, 2.0) for count in range(HALF)]
        if temperature_milli > 0:
            noise = random.Random("%d:%d:%d:g" % (key, position, rank))
            temperature = temperature_milli / 1000.0
            scores = [logit / temperature + _gumbel(noise) for logit in logits]
        else:
            scores = logits
        best = max(range(HALF), key=scores.__getitem__)
        row = [first + best, scores[best]]
        if top is not None:
            order = sorted(range(HALF), key=logits.__getitem__, reverse=True)[:max(top, 1)]
            row.append(_lse(logits))
            row.append([[first + index, logits[index]] for index in order])
            row.append(logits[best])
        rows.append(row)
    return rows + _filler_rows(key, rank, scored, positions, top)


FILLER_BLOCK = 256


def _filler_rows(key, rank, start, end, top):
    """Rows of the same shape from a few draws: the text the model writes on past its EOS.

    A position's sampled id and score depend only on the request and the position (one
    generator a block of 256 positions), never on ``top``, so the text is the same with
    or without logprobs; the logprob fields are a plausible half (``top`` candidates and
    the chosen id above a flat rest), all <= 0 once merged.
    """
    rows = []
    first = rank * HALF
    for block in range(start // FILLER_BLOCK, -(-end // FILLER_BLOCK)):
        rng = random.Random((key * 4099 + block) * 2 + rank)
        for position in range(block * FILLER_BLOCK, min((block + 1) * FILLER_BLOCK, end)):
            best, score = rng.randrange(HALF), round(rng.random(), 6)
            if position >= start:
                rows.append([first + best, score] + ([] if top is None else
                                                     _filler_logprobs(key, rank, position, best, top)))
    return rows


def _filler_logprobs(key, rank, position, best, top):
    """[lse, top [id, logit] pairs, the chosen id's logit] of a filler position."""
    first = rank * HALF
    rng = random.Random("%d:%d:%d:lp" % (key, position, rank))
    logits = {best: rng.gauss(3.0, 1.0)}
    while len(logits) < min(max(top, 1) + 1, HALF):
        logits.setdefault(rng.randrange(HALF), rng.gauss(2.0, 1.5))
    order = sorted(logits, key=logits.__getitem__, reverse=True)[:max(top, 1)]
    high = max(logits.values())
    rest = (HALF - len(logits)) * math.exp(-high)  # the other logits of the half, at 0
    lse = high + math.log(sum(math.exp(value - high) for value in logits.values()) + rest)
    return [lse, [[first + index, logits[index]] for index in order], logits[best]]


def pick(row0, row1):
    """The sampled token of one position from the two halves' best candidates."""
    return row0[0] if row0[1] >= row1[1] else row1[0]
