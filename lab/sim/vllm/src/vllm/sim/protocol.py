"""The OpenAI-compatible request and response bodies, checked as vLLM checks them.

Errors use vLLM's body: ``{"error": {"message", "type", "param", "code"}}`` with the HTTP
status as code (404 NotFoundError for a model it does not serve, 400 BadRequestError for a
bad parameter). Fields vLLM does not know are ignored with a warning, as vLLM does.
"""

import uuid

from vllm.sim import log, model

COMMON = {"model", "n", "max_tokens", "min_tokens", "ignore_eos", "stop", "seed", "temperature", "top_p", "top_k",
          "min_p", "stream", "stream_options", "logprobs", "user", "presence_penalty", "frequency_penalty",
          "repetition_penalty", "stop_token_ids", "skip_special_tokens", "include_stop_str_in_output",
          "response_format", "logit_bias", "priority", "request_id", "truncate_prompt_tokens"}
CHAT = COMMON | {"messages", "max_completion_tokens", "top_logprobs", "chat_template_kwargs", "tools", "tool_choice",
                 "parallel_tool_calls", "reasoning_effort", "add_generation_prompt", "continue_final_message",
                 "chat_template", "documents", "echo"}
TEXT = COMMON | {"prompt", "echo", "suffix", "best_of", "prompt_logprobs", "add_special_tokens"}


class ApiError(Exception):
    def __init__(self, status, message, kind="BadRequestError", param=None):
        Exception.__init__(self, message)
        self.status = status
        self.kind = kind
        self.param = param

    def body(self):
        return {"error": {"message": str(self), "type": self.kind, "param": self.param, "code": self.status}}


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def integer(body, name, least, default=None):
    value = body.get(name)
    if value is None:
        return default
    if not is_int(value):
        raise ApiError(400, "%s must be an integer, got %r" % (name, value), param=name)
    if value < least:
        raise ApiError(400, "%s must be at least %d, got %d." % (name, least, value), param=name)
    return value


class Request(object):
    """A checked completion request: its prompts (token ids) and sampling parameters."""

    def __init__(self, kind, config):
        self.kind = kind  # "chat" or "text"
        self.ident = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex
        self.config = config
        self.prompts = []
        self.thinking = False
        self.parsed = False  # a reasoning parser splits reasoning from content
        self.n = 1
        self.max_tokens = None
        self.min_tokens = 0
        self.ignore_eos = False
        self.stop = []
        self.seed = None
        self.temperature = 1.0
        self.logprobs = None  # None, or how many top logprobs a token (0 = only the sampled one)
        self.stream = False
        self.include_usage = False

    def budgets(self):
        """max_tokens of each prompt: the request's, else what the context leaves (vLLM's default)."""
        limit = self.config.max_model_len
        out = []
        for ids in self.prompts:
            if len(ids) >= limit:
                raise ApiError(400, "This model's maximum context length is %d tokens. However, your request has %d "
                               "input tokens. Please reduce the length of the input messages." % (limit, len(ids)),
                               param="messages" if self.kind == "chat" else "prompt")
            if self.max_tokens is None:
                out.append(limit - len(ids))
            elif len(ids) + self.max_tokens > limit:
                raise ApiError(400, "'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum "
                               "context length is %d tokens and your request has %d input tokens (%d > %d - %d)."
                               % (self.max_tokens, limit, len(ids), self.max_tokens, limit, len(ids)),
                               param="max_tokens")
            else:
                out.append(self.max_tokens)
        return out


def check_model(body, config):
    name = body.get("model")
    if name is not None and name not in config.served_names:
        raise ApiError(404, "The model `%s` does not exist." % name, "NotFoundError", "model")


def parse_logprobs(body, request, config):
    if request.kind == "chat":
        wanted, top = body.get("logprobs"), body.get("top_logprobs")
        if wanted is not None and not isinstance(wanted, bool):
            raise ApiError(400, "logprobs must be true or false", param="logprobs")
        if top is not None:
            if not is_int(top) or top < 0:
                raise ApiError(400, "`top_logprobs` must be a positive value.", param="top_logprobs")
            if not wanted:
                raise ApiError(400, "when using `top_logprobs`, `logprobs` must be set to true.", param="top_logprobs")
        count = (top or 0) if wanted else None
    else:
        count = integer(body, "logprobs", 0)
    if count is not None and count > config.args.max_logprobs:
        raise ApiError(400, "Requested sample logprobs of %d, which is greater than max allowed: %d"
                       % (count, config.args.max_logprobs), param="logprobs")
    request.logprobs = count


def parse_prompts(body, request, config):
    if request.kind == "chat":
        kwargs = body.get("chat_template_kwargs") or {}
        if not isinstance(kwargs, dict):
            raise ApiError(400, "chat_template_kwargs must be an object", param="chat_template_kwargs")
        request.thinking = bool(kwargs.get("enable_thinking", config.default_thinking))
        request.parsed = bool(config.args.reasoning_parser)
        try:
            request.prompts = [model.chat_prompt(body.get("messages"), request.thinking)]
        except model.PromptError as exc:
            raise ApiError(400, str(exc), param=exc.param) from None
        return
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        request.prompts = [model.tokenize(prompt)]
    elif isinstance(prompt, list) and prompt and all(is_int(item) and item >= 0 for item in prompt):
        request.prompts = [list(prompt)]
    elif isinstance(prompt, list) and prompt and all(isinstance(item, str) for item in prompt):
        request.prompts = [model.tokenize(item) for item in prompt]
    else:
        raise ApiError(400, "prompt must be a string, a list of strings or a list of token ids", param="prompt")


def parse(body, kind, config):
    """A Request from a JSON body, or ApiError."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    check_model(body, config)
    ignored = sorted(set(body) - (CHAT if kind == "chat" else TEXT))
    if ignored:
        log.warning("protocol.py:51", "The following fields were present in the request but ignored: {%s}"
                    % ", ".join(repr(name) for name in ignored), log.API)
    request = Request(kind, config)
    parse_prompts(body, request, config)
    request.n = integer(body, "n", 1, 1)
    name = "max_completion_tokens" if kind == "chat" and body.get("max_completion_tokens") is not None else "max_tokens"
    request.max_tokens = integer(body, name, 1)
    request.min_tokens = integer(body, "min_tokens", 0, 0)
    if request.max_tokens is not None and request.min_tokens > request.max_tokens:
        raise ApiError(400, "min_tokens must be less than or equal to max_tokens=%d, got %d."
                       % (request.max_tokens, request.min_tokens), param="min_tokens")
    ignore = body.get("ignore_eos", False)
    if not isinstance(ignore, bool):
        raise ApiError(400, "ignore_eos must be true or false", param="ignore_eos")
    request.ignore_eos = ignore
    stop = body.get("stop")
    stop = [stop] if isinstance(stop, str) else stop
    if stop is not None and not (isinstance(stop, list) and all(isinstance(item, str) for item in stop)):
        raise ApiError(400, "stop must be a string or a list of strings", param="stop")
    request.stop = stop or []
    seed = body.get("seed")
    if seed is not None and not is_int(seed):
        raise ApiError(400, "seed must be an integer", param="seed")
    request.seed = seed
    temperature = body.get("temperature", 1.0)
    if temperature is None:
        temperature = 1.0
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or temperature < 0:
        raise ApiError(400, "temperature must be non-negative, got %r." % (temperature,), param="temperature")
    request.temperature = float(temperature)
    parse_logprobs(body, request, config)
    request.stream = bool(body.get("stream"))
    options = body.get("stream_options")
    if options is not None and not request.stream:
        raise ApiError(400, "Stream options can only be defined when `stream=True`.", param="stream_options")
    request.include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
    return request


# --- pieces of the responses ------------------------------------------------------------

def usage(prompt_tokens, completion_tokens):
    return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens, "prompt_tokens_details": None}


def chat_logprob(text, logprob, top):
    def entry(token, value):
        return {"token": token, "logprob": value, "bytes": list(token.encode("utf-8"))}
    item = entry(text, logprob)
    item["top_logprobs"] = [entry(token, value) for token, value in top]
    return item


def text_logprobs(entries, offset):
    """Completions' logprobs object of [(text, logprob, top)] starting at a text offset."""
    out = {"text_offset": [], "token_logprobs": [], "tokens": [], "top_logprobs": []}
    for text, logprob, top in entries:
        out["text_offset"].append(offset)
        out["token_logprobs"].append(logprob)
        out["tokens"].append(text)
        out["top_logprobs"].append(dict(top) if top else {text: logprob})
        offset += len(text)
    return out


def models(config, created):
    data = [{"id": name, "object": "model", "created": created, "owned_by": "vllm", "root": config.model,
             "parent": None, "max_model_len": config.max_model_len,
             "permission": [{"id": "modelperm-" + uuid.uuid4().hex, "object": "model_permission", "created": created,
                             "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
                             "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
                             "organization": "*", "group": None, "is_blocking": False}]}
            for name in config.served_names]
    return {"object": "list", "data": data}
