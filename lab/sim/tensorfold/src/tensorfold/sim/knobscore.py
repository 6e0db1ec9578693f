"""Per-request knobs and the rank-to-rank request header, for ``knobs.py``."""

# Per-request knobs a request may set in "tf_knobs" (echoed in tensorfold.tf_knobs).
RUNTIME = ("lookup", "lookup_min", "auto_fdrafts", "depth", "prefill_rows", "expert_loop", "longctx_graphs",
           "profile", "fast_prefill", "fp8_prefill", "prefill_overlap", "fat_experts", "moe_glue", "mtp_window",
           "hc_fused", "attn_bm32", "b12x")
# Knobs fixed at load: naming one in a request is an error.
LOAD_TIME = ("batch", "kv_pool_tokens", "latent_kv", "kv_dtype", "nonexpert", "context", "session_gib",
             "comm_backend", "vision", "prefill_rows_max")


def request_knobs(value):
    """Check a request's tf_knobs; returns the dict or raises ValueError."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("tf_knobs must be an object")
    for name in value:
        if name in LOAD_TIME:
            raise ValueError("tf_knobs: %s is set at load and cannot change per request" % name)
        if name not in RUNTIME:
            raise ValueError("tf_knobs: unknown knob %r" % name)
    return dict(value)


def pack(names, values):
    """The header as sent: integers in ``names`` order."""
    return [int(values[name]) for name in names]


def unpack(names, fields, rank):
    """Received fields as a dict; a header of another length is another build."""
    if len(fields) != len(names):
        raise RuntimeError(
            "request header mismatch: rank %d received %d header fields, this build's knobs.HEADER has %d (%s); "
            "both ranks must run the same image" % (rank, len(fields), len(names), ", ".join(names)))
    return dict(zip(names, fields))
