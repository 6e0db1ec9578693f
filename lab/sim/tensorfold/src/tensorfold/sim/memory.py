"""The memory a rank has when it fits its request slots at load, and the kit's slot rule on it.

On a GB10 memory is unified: cudaMemGetInfo's free memory is the kernel's MemFree, so every
page of page cache - weights left warm by a copy or a previous start, a `docker load`, any
file read - counts as used when the engine fits its request slots at load (kit §5). A rank
asks "the driver" what is free: in the lab, the node's glm53-lab-gpud on
/run/glm53-lab/gpu.sock (GLM53_LAB_GPU_SOCK; the lab's nvidia runtime or hook mounts it into
--gpus containers), which reports the node's own memory from its cgroup; without the socket
(a rank outside the lab, the unit tests' default) /proc/meminfo's MemFree.

The rule, the kit's, on each rank: slot 0 always; each further slot k (1 .. GLM53_TF_BATCH-1)
while

    free - weights - session - k * slot >= reserve

- weights: what the load takes out of free memory. GLM53_LAB_LOAD=copy (default): all of
  the weight bytes, copied into device memory, as the real engine's load does - the page
  cache a copy or a previous start left of them is more on top, which is why the collection
  evicts them before a start. GLM53_LAB_LOAD=mapped: only the bytes not in the page cache yet
  (the load reads them into the cache and the GPU maps them): warm weights then cost nothing.
- session: GLM53_TF_SESSION_GIB (the RAM session store), scaled by the driver's total memory
  against a GB10's 128 GiB (2 GiB on a 4 GiB node: 64 MiB).
- slot, reserve: lab scale, GLM53_LAB_SLOT_MIB (256) a further slot and GLM53_LAB_RESERVE_MIB
  (896) kept free: GLM53_TF_BATCH_RESERVE_GB and the per-sequence estimates are GB10 sizes.

On a lab node of 4 GiB (lab/sparklab/layout.py NODE_MEMORY) with the C8 profile's 8 slots and
2 GiB session store, 8 slots need 224 (the lab's weights and drafter) + 64 + 7 x 256 + 896 =
2976 MiB free at load, under the lab inventory's MEM_GATE_GIB=3 (3072 MiB) by what the rank's own
processes take before it measures: a node using up to ~1.1 GiB besides them fits all 8 (a node after the
deploy, weights evicted, uses about 0.2-0.6 GiB), and every further 256 MiB of page cache or
anything else costs one slot - about 1 GiB of stray page cache (a `docker load` of a large
image, unrelated files, the weights left warm beside other cache) costs slots. Both ranks
agree on the fewest slots that fit on either (the kit's rule holds on both ranks).
"""

import json
import os
import socket

from tensorfold.sim import env

MIB = 1 << 20
GIB = 1 << 30
GB10_BYTES = 128 * GIB  # a GB10's memory: what the session store's size is scaled against
SOCKET = "/run/glm53-lab/gpu.sock"
LOADS = ("copy", "mapped")


def socket_path():
    return env.text("GLM53_LAB_GPU_SOCK", SOCKET)


def slot_bytes():
    return int(env.number("GLM53_LAB_SLOT_MIB", 256.0) * MIB)


def reserve_bytes():
    return int(env.number("GLM53_LAB_RESERVE_MIB", 896.0) * MIB)


def load_mode():
    mode = env.text("GLM53_LAB_LOAD", "copy")
    if mode not in LOADS:
        env.log("[tensorfold] GLM53_LAB_LOAD=%s: expected %s" % (mode, " or ".join(LOADS)))
        raise SystemExit(1)
    return mode


def ask_driver(path, timeout=5.0):
    """The driver's {total, free, cached, available} in bytes, or None (no socket, no answer)."""
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


def from_meminfo(text):
    """The same figures from a /proc/meminfo text: MemTotal, MemFree, Cached, MemAvailable."""
    values = {}
    for line in text.splitlines():
        name, rest = line.partition(":")[::2]
        fields = rest.split()
        if fields and fields[0].isdigit():
            values[name] = int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return {"total": values.get("MemTotal", 0), "free": values.get("MemFree", 0),
            "cached": values.get("Cached", 0), "available": values.get("MemAvailable", 0)}


def query(path=None):
    """(figures, where they came from): the driver socket, else /proc/meminfo."""
    path = path or socket_path()
    answer = ask_driver(path)
    if answer is not None:
        return answer, path
    why = "no %s" % path if not os.path.exists(path) else "%s did not answer" % path
    with open("/proc/meminfo") as handle:
        return from_meminfo(handle.read()), "/proc/meminfo MemFree, %s" % why


def fit(requested, free, weights, session, slot, reserve):
    """Request slots that fit: slot 0 always; each further slot k while
    free - weights - session - k * slot >= reserve, up to `requested`."""
    if requested <= 1:
        return max(requested, 1)
    slots = 1
    while slots < requested and free - weights - session - slots * slot >= reserve:
        slots += 1
    return slots


def measure(requested, session_gib, weights, resident, path=None):
    """This rank's memory at load and what fits in it (a dict: rank 1 sends it to rank 0).
    `weights`: the weight files' bytes (whole pages), `resident`: those in the page cache."""
    answer, source = query(path)
    scale = float(answer["total"]) / GB10_BYTES if answer["total"] > 0 else 1.0
    session = int(max(session_gib, 0.0) * GIB * scale)
    need = weights if load_mode() == "copy" else max(weights - resident, 0)
    slot, reserve = slot_bytes(), reserve_bytes()
    return {"total": answer["total"], "free": answer["free"], "cached": answer["cached"], "source": source,
            "weights": weights, "resident": resident, "need": need, "session": session, "slot": slot,
            "reserve": reserve, "fits": fit(requested, answer["free"], need, session, slot, reserve)}


def agree(requested, ranks):
    """(slots, index of the rank that was short or None): the fewest slots that fit on any rank.
    A rank without a measurement (an older build's hello) does not count."""
    measured = [(m["fits"], m["free"] - m["need"] - m["session"], index)
                for index, m in enumerate(ranks) if isinstance(m, dict) and "fits" in m]
    if not measured:
        return max(requested, 1), None
    fits, short = min(measured)[::2]
    slots = min(max(requested, 1), fits)
    return slots, (short if slots < requested else None)


def _mib(value):
    return int(value // MIB)


def memory_line(rank, m, requested):
    """The rank's boot line: what the driver said, and what fits in it."""
    weights = "weights %d MiB" % _mib(m["need"])
    if m["need"] != m["weights"]:
        weights += " not in the page cache yet (of %d MiB, GLM53_LAB_LOAD=mapped)" % _mib(m["weights"])
    return ("[tensorfold] rank %d: %d MiB free of %d MiB at load (page cache %d MiB, counted as used on GB10; "
            "from %s); %d of %d slot(s) fit: %s + session store %d MiB + %d MiB a further slot + %d MiB reserve"
            % (rank, _mib(m["free"]), _mib(m["total"]), _mib(m["cached"]), m["source"], m["fits"],
               max(requested, 1), weights, _mib(m["session"]), _mib(m["slot"]), _mib(m["reserve"])))


def shortfall_line(requested, slots, reserve_gb, session_gib, rank, m):
    """Rank 0's line when fewer slots fit than GLM53_TF_BATCH asks (the kit parses its head)."""
    store = " and the session store's %.1f GiB" % session_gib if session_gib > 0 else ""
    return ("[tensorfold] GLM53_TF_BATCH=%d: only %d sequence(s) fit with GLM53_TF_BATCH_RESERVE_GB=%s kept free "
            "(rank %d had %d MiB free of %d MiB at load, with %d MiB of page cache counted as used, as on GB10; "
            "lab scale: %d MiB a sequence, %d MiB kept free, %d MiB of weights, %d MiB of session store)%s; "
            "serving that many"
            % (requested, slots, "%g" % reserve_gb, rank, _mib(m["free"]), _mib(m["total"]), _mib(m["cached"]),
               _mib(m["slot"]), _mib(m["reserve"]), _mib(m["need"]), _mib(m["session"]), store))
