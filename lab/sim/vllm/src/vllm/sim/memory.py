"""A rank's memory at load, as the driver reports it, and vLLM's two checks on it.

On a GB10 memory is unified: the free memory the driver reports (cudaMemGetInfo) is the
kernel's MemFree, so page cache counts as used (lab/README.md, "Memory"). A rank asks the
driver: in the lab, the node's glm53-lab-gpud on /run/glm53-lab/gpu.sock (GLM53_LAB_GPU_SOCK),
one JSON line {total, free, cached, available} a connection; without it (outside the lab)
/proc/meminfo's MemTotal and MemFree.

vLLM's checks, on every rank:
1. At start (after the rendezvous): the memory it wants is --gpu-memory-utilization x total;
   if less than that is free, ValueError "Free memory on device cuda:0 (F/T GiB) on startup is
   less than desired GPU memory utilization (U, R GiB). ...".
2. After the load: the KV cache gets what is left of that after the weights this rank holds
   and the activations/CUDA context; none left is "No available memory for the cache
   blocks", and too little for one request of --max-model-len tokens is an error too.
The weights a rank holds: the model directory's *.safetensors bytes / the world size
(tensor parallel shards them). Activations and KV a token are lab-scale knobs
(VLLM_SIM_OVERHEAD_MIB, VLLM_SIM_KV_BYTES_PER_TOKEN).
"""

import json
import os
import socket

GIB = float(1 << 30)


def ask_driver(path, timeout=5.0):
    """The driver's figures in bytes, or None when there is no socket or no sound answer."""
    if not os.path.exists(path):
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(path)
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        answer = json.loads(data.decode("utf-8"))
        return dict((key, int(answer[key])) for key in ("total", "free", "cached", "available"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def meminfo(text):
    """The same figures from a /proc/meminfo text (values in kB)."""
    values = {}
    for row in text.splitlines():
        name, rest = row.partition(":")[::2]
        fields = rest.split()
        if fields and fields[0].isdigit():
            values[name] = int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return {"total": values.get("MemTotal", 0), "free": values.get("MemFree", 0),
            "cached": values.get("Cached", 0), "available": values.get("MemAvailable", 0)}


def query(path):
    """(figures, where they came from)."""
    answer = ask_driver(path)
    if answer is not None:
        return answer, path
    with open("/proc/meminfo") as handle:
        why = "no %s" % path if not os.path.exists(path) else "%s did not answer" % path
        return meminfo(handle.read()), "/proc/meminfo MemFree (%s)" % why


def gib(value):
    return round(value / GIB, 2)


def requested(util, figures):
    return util * figures["total"]


def startup_check(util, figures):
    """Check 1: raise vLLM's ValueError when less than util x total is free."""
    want = requested(util, figures)
    if figures["free"] < want:
        raise ValueError("Free memory on device cuda:0 (%s/%s GiB) on startup is less than desired GPU memory "
                         "utilization (%s, %s GiB). Decrease GPU memory utilization or reduce GPU memory used by "
                         "other processes." % (gib(figures["free"]), gib(figures["total"]), util, gib(want)))


def weight_files(model):
    """The *.safetensors files of the model directory (symlinks followed, as a snapshot's are)."""
    try:
        names = sorted(os.listdir(model))
    except OSError:
        return []
    return [os.path.join(model, name) for name in names
            if name.endswith(".safetensors") and os.path.isfile(os.path.join(model, name))]


def weights_bytes(files):
    return sum(os.path.getsize(path) for path in files)


def kv_budget(util, figures, weights_rank, overhead, per_token, max_model_len):
    """Check 2: (KV bytes, KV tokens) this rank can give the cache, or vLLM's ValueError."""
    available = int(requested(util, figures) - weights_rank - overhead)
    if available <= 0:
        raise ValueError("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                         "when initializing the engine.")
    tokens = available // max(per_token, 1)
    if tokens < max_model_len:
        raise ValueError("To serve at least one request with the models's max seq len (%d), (%.2f GiB KV cache is "
                         "needed, which is larger than the available KV cache memory (%.2f GiB). Based on the "
                         "available memory, the estimated maximum model length is %d. Try increasing "
                         "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
                         % (max_model_len, max_model_len * per_token / GIB, available / GIB, tokens))
    return available, tokens
