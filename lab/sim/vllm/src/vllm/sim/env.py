"""Environment knobs: vLLM's own (read as vLLM reads them) and the lab's VLLM_SIM_* ones.

A knob that is set but not a number is a start-up error, as a bad value of a real
vLLM environment variable is: better a rank that refuses to start than one that runs
with a value nobody asked for.
"""

import os


class KnobError(ValueError):
    pass


def text(name, default=""):
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def number(name, default, kind=float):
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return kind(value)
    except ValueError:
        raise KnobError("%s=%r is not a%s number" % (name, value, "n integer" if kind is int else "")) from None


def flag(name, default=False):
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


# --- the lab's knobs (no such variable in real vLLM) --------------------------------

def rendezvous_timeout():
    """Seconds a rank waits for the others at the rendezvous (torch's default is 10 to 30 min)."""
    return number("VLLM_SIM_RENDEZVOUS_TIMEOUT", 60.0)


def load_seconds():
    """Least time the simulated weight load takes, on every rank."""
    return number("VLLM_SIM_LOAD_SECONDS", 2.0)


def heartbeat_seconds():
    return number("VLLM_SIM_HEARTBEAT_SECONDS", 1.0)


def peer_timeout():
    """Silence after which a peer counts as gone (torch's NCCL watchdog default: 600 s)."""
    return number("VLLM_SIM_PEER_TIMEOUT", 600.0)


def token_seconds():
    """One decode step (one token of every running sequence)."""
    return number("VLLM_SIM_TOKEN_SECONDS", 0.02)


def prefill_tps():
    return number("VLLM_SIM_PREFILL_TPS", 4000.0)


def gpus_per_node():
    return number("VLLM_SIM_GPUS_PER_NODE", 1, int)


def kv_bytes_per_token():
    """KV cache a token takes on a rank, lab scale (about 24 KiB on a GB10 / 32)."""
    return number("VLLM_SIM_KV_BYTES_PER_TOKEN", 768, int)


def overhead_bytes():
    """Activations and CUDA context a rank needs besides weights and KV, lab scale."""
    return int(number("VLLM_SIM_OVERHEAD_MIB", 128.0) * (1 << 20))


def gpu_socket():
    """The lab's stand-in for the driver (the same knob the simulated TensorFold reads)."""
    return text("GLM53_LAB_GPU_SOCK", "/run/glm53-lab/gpu.sock")


def validate():
    """Read every numeric knob once at start: a bad value fails the start, not a thread later."""
    for knob in (rendezvous_timeout, load_seconds, heartbeat_seconds, peer_timeout, token_seconds, prefill_tps,
                 gpus_per_node, kv_bytes_per_token, overhead_bytes, stats_interval):
        knob()


# --- vLLM's own ---------------------------------------------------------------------

def stats_interval():
    return number("VLLM_LOG_STATS_INTERVAL", 10.0)


def host_ip():
    return text("VLLM_HOST_IP", "")


def api_key():
    return text("VLLM_API_KEY", "")


def allow_long_max_model_len():
    return flag("VLLM_ALLOW_LONG_MAX_MODEL_LEN")
