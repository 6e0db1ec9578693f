# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kit's ``config/prod.env`` rendered on the controller from the profile's
``prod-c8.env.example``: read the example as ``set -a; source`` reads it, put in the
site's values and the operator's overrides, and write text that sources back to exactly
those values. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import re
import shlex

from ansible_collections.dgx_spark.glm53.plugins.module_utils._cluster_contract import validate as contract_problems
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _api_endpoint
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._nccl_env import problems as nccl_problems
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._site_spec import site_default

OVERRIDES_VAR = "tensorfold_env_overrides"

# The kit mounts each node's HF cache here; MODEL_PATH and DRAFTER are paths inside it.
CONTAINER_HF = "/root/.cache/huggingface"

# Values the site supplies, and the variable an operator changes instead of overriding them.
SITE_SOURCES = {
    "WORKER_SSH": "the cluster contract: set the worker's glm53_link_address (and cx7_link_ssh_user)",
    "HEAD_IP": "the cluster contract: set the head's glm53_link_address",
    "NCCL_SOCKET_IFNAME": "the cluster contract: set glm53_link_netdev",
    "NCCL_IB_HCA": "the cluster contract: set glm53_link_netdev / glm53_link_second_netdev",
    "MASTER_PORT": "the cluster contract: set cx7_link_master_port_tensorfold",
    "HEAD_HF": "the hf_weights facts: set glm53_hf_cache_dir on the head",
    "WORKER_HF": "the hf_weights facts: set glm53_hf_cache_dir on the worker",
    "MODEL_PATH": "the hf_weights facts: choose the weights in the hf_weights role",
    "DRAFTER": "the hf_weights facts: choose or refuse the drafter in the hf_weights role",
    "IMAGE": "the tensorfold role: set tensorfold_image",
    "HOST": "the site values: set glm53_api_bind (an address of the head; non-loopback exposes the API, which has "
            "no authentication)",
    "PORT": "the site values: set glm53_api_port (the role probes the API there)",
    # The ranks' container names are the collection's (plugins/module_utils/_engines.py): the
    # preflight's serving mode, engine_stop and wait_for_slots know the ranks by them.
    "NAME": "the collection: the ranks are glm53-tf-r0 and glm53-tf-r1 (plugins/module_utils/_engines.py), which "
            "the preflight, engine_stop and wait_for_slots know them by",
    "STATE_DIR": "the tensorfold role: set tensorfold_kit_state_dir (the role holds the kit's lock there)",
}
SITE_KEYS = tuple(sorted(SITE_SOURCES))

# serve.sh refuses to start while any of these still holds a <...> placeholder (kit.md 2.1).
PLACEHOLDER_KEYS = ("WORKER_SSH", "HEAD_IP", "HEAD_HF", "WORKER_HF", "MODEL_PATH")

# Variables serve.sh itself reads (kit.md 2.1, 2.4, 3.3) that the example may not set.
SERVE_KEYS = (
    "NAME", "IMAGE", "HOST", "PORT", "CONTEXT", "MAX_TOKENS", "SERVED_NAME", "MODEL_PATH", "DRAFTER",
    "MTP_DRAFTS", "NO_DRAFTS", "EXTRA_ARGS", "MASTER_PORT",
    "HEAD_PREPARED", "WORKER_PREPARED", "HEAD_SESSIONS", "WORKER_SESSIONS",
    "CPUSET", "HEAD_CPUSET", "WORKER_CPUSET", "CONTAINER_RT", "MALLOC_ARENA_MAX",
    "CANARY", "CANARY_MIN_TPR", "CANARY_MIN_TPS", "WARMUP_LENGTHS",
    "MEM_GATE_GIB", "MEM_GATE_TIMEOUT", "MEM_GATE_DROP_CACHES", "START_DROP_CACHES_GIB",
    "START_ATTEMPTS", "SLOT_RETRIES", "READY_TIMEOUT", "FORCE_CONTEXT",
    "LOG_MAX_SIZE", "LOG_MAX_FILE", "PREFLIGHT", "NCCL_PASSTHROUGH", "PATCHES", "GPUWATCH_PREFLIGHT",
    "WATCH_GRACE", "WATCH_FAILS", "WATCH_HEAL", "WATCH_MIN_HEAL", "WATCH_INTERVAL", "WATCH_ALERT",
    "WATCH_MIN_TPR", "WATCH_TPR_ROUNDS",
)

# Engine knobs the references name beyond the example (defaults apply when unset).
ENGINE_KEYS = (
    "GLM53_TF_HEALTH", "GLM53_TF_STALL_S", "GLM53_TF_STALL_PREFILL_TPS", "GLM53_TF_EXTRA_STOP",
    "GLM53_TF_VISION_FETCH", "GLM53_TF_SNAPSHOT_BEFORE_END", "GLM53_TF_EMIT_FIRST", "GLM53_TF_DISCONNECT",
    "GLM53_TF_ASSISTANT_ENDS", "GLM53_TF_DEC_EXPERT_LOADS", "GLM53_TF_DEC_EXPERT_LOADS_CFG",
    "GLM53_TF_CPU_PIN", "GLM53_TF_GRAMMAR", "GLM53_TF_TOOL_FIXES", "GLM53_TF_TOKCACHE",
    "GLM53_TF_SNAPSHOT_GRID", "GLM53_TF_SNAPSHOT_TAIL", "GLM53_TF_SESSION_EVERY", "GLM53_TF_SESSION_FORK_MIN",
    "GLM53_TF_DECODE_KERNELS", "GLM53_TF_PREPARED_WRITE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
)

# Set by serve.sh at run time; a value in the config would break it (GLM53_TF_LOCKED skips the start lock).
INTERNAL_KEYS = ("CONFIG", "FORCE_DROP", "IMAGE_ID", "STATE_DIR", "GLM53_TF_LOCKED", "GLM53_TF_IMAGE_ID",
                 "GLM53_TF_LAUNCH_T0", "GLM53_TF_PREPARED", "RANK", "MASTER")

# serve.sh does bash arithmetic on these ((...)): anything but a whole number >= 0 breaks the
# start (or, for MEM_GATE_GIB, the eviction target the role derives from it).
WHOLE_NUMBER_KEYS = ("MEM_GATE_GIB", "MEM_GATE_TIMEOUT", "START_DROP_CACHES_GIB", "START_ATTEMPTS", "SLOT_RETRIES",
                     "READY_TIMEOUT", "WATCH_GRACE", "WATCH_FAILS", "WATCH_MIN_HEAL", "WATCH_INTERVAL",
                     "GLM53_TF_BATCH")
_WHOLE = re.compile(r"^[0-9]+$")

# Engine knobs reach the ranks by prefix (serve.sh passes every GLM53_TF_*): a new name is
# accepted unless it is a near miss (edit distance <= 2) of a known one.
OPEN_PREFIXES = ("GLM53_TF_",)
NEAR_MISS = 2
# NCCL_* reach the ranks with NCCL_PASSTHROUGH=1 and are judged against the names NCCL
# documents (_nccl_env), except serve.sh's own NCCL_ switch.
NCCL_PREFIX = "NCCL_"
SERVE_NCCL_KEYS = tuple(key for key in SERVE_KEYS if key.startswith(NCCL_PREFIX))

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ASSIGN = re.compile(r"^(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)=")
_PLACEHOLDER = re.compile(r"<[^>]*>")
_DQ_ESCAPES = "$`\"\\"


class EnvSyntaxError(ValueError):
    """A line whose value ``source`` would compute at run time (expansion, command) or split."""


def _word(text, start, lineno):
    """The value of one assignment word from ``start``: (value, end). Quoting as bash applies it."""
    out = []
    pos = start
    size = len(text)
    while pos < size:
        char = text[pos]
        if char in " \t":
            break
        if char == "'":
            end = text.find("'", pos + 1)
            if end < 0:
                raise EnvSyntaxError("line %d: unterminated single quote (values must fit on one line)" % lineno)
            out.append(text[pos + 1:end])
            pos = end + 1
        elif char == '"':
            pos += 1
            while True:
                if pos >= size:
                    raise EnvSyntaxError("line %d: unterminated double quote (values must fit on one line)" % lineno)
                inner = text[pos]
                if inner == '"':
                    pos += 1
                    break
                if inner == "\\" and pos + 1 < size and text[pos + 1] in _DQ_ESCAPES:
                    out.append(text[pos + 1])
                    pos += 2
                    continue
                if inner in "$`":
                    raise EnvSyntaxError("line %d: %r expands at run time; quote it with single quotes" % (lineno, inner))
                out.append(inner)
                pos += 1
        elif char == "\\":
            if pos + 1 >= size:
                raise EnvSyntaxError("line %d: a continued line (trailing backslash)" % lineno)
            out.append(text[pos + 1])
            pos += 2
        elif char in "$`":
            raise EnvSyntaxError("line %d: %r expands at run time; quote it with single quotes" % (lineno, char))
        elif char in ";&|<>()":
            raise EnvSyntaxError("line %d: unquoted %r is shell syntax, not part of a value" % (lineno, char))
        elif char == "~" and (pos == start or text[pos - 1] == ":"):
            # Tilde expansion applies after '=' and ':' in an assignment.
            raise EnvSyntaxError("line %d: an unquoted ~ expands to a home directory; give an absolute path" % lineno)
        else:
            out.append(char)
            pos += 1
    return "".join(out), pos


def parse_env(text):
    """The lines of an env file in order: ``[{type, line, lineno, key?, value?, comment?}]``.

    ``type`` is ``blank``, ``comment`` or ``assign``; an assignment has ``key``, ``value``
    (what ``source`` assigns) and ``comment`` (a trailing ``# ...`` or ''). Duplicates stay.
    Lines whose value bash would compute at run time raise EnvSyntaxError naming the line.
    """
    entries = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for lineno, line in enumerate(lines, 1):
        body = line.lstrip(" \t")
        if not body:
            entries.append({"type": "blank", "line": line, "lineno": lineno})
            continue
        if body.startswith("#"):
            entries.append({"type": "comment", "line": line, "lineno": lineno})
            continue
        match = _ASSIGN.match(body)
        if not match:
            raise EnvSyntaxError("line %d: not a KEY=value assignment: %r" % (lineno, line))
        value, end = _word(body, match.end(), lineno)
        rest = body[end:].lstrip(" \t")
        if rest and not rest.startswith("#"):
            raise EnvSyntaxError("line %d: text after the value would run as a command: %r" % (lineno, line))
        entries.append({"type": "assign", "line": line, "lineno": lineno, "key": match.group(1), "value": value,
                        "comment": rest})
    return entries


def effective(entries):
    """``{key: value}`` as ``source`` leaves them: the last assignment of a key wins."""
    values = {}
    for entry in entries:
        if entry["type"] == "assign":
            values[entry["key"]] = entry["value"]
    return values


def env_value(value):
    """An override or site value as the string the file holds (bool -> 1/0)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return value
    raise TypeError("%s is not a string, number or boolean" % type(value).__name__)


def shell_quote(value):
    """The value as ``source`` reads it back exactly: bare when safe, else single-quoted; an
    empty value stays empty (``KEY=``, as the example writes it)."""
    return shlex.quote(value) if value else ""


def _levenshtein(left, right):
    previous = list(range(len(right) + 1))
    for i, lchar in enumerate(left, 1):
        current = [i]
        for j, rchar in enumerate(right, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (lchar != rchar)))
        previous = current
    return previous[-1]


def all_known_keys(example_entries):
    """Every key an override may name: the example's, serve.sh's own and the engine knobs."""
    return sorted(set(effective(example_entries)) | set(SERVE_KEYS) | set(ENGINE_KEYS))


def _unknown(key, known):
    """An error for a key nobody reads, or None when the key is accepted."""
    if key in known:
        return None
    near = sorted((_levenshtein(key, name), name) for name in known)
    near = [name for distance, name in near if distance <= NEAR_MISS]
    if key.startswith(OPEN_PREFIXES) and not near:
        return None
    close = near[:3] or difflib.get_close_matches(key, known, n=3, cutoff=0.75)
    if close:
        return "%s: unknown key %r (did you mean %s?)" % (OVERRIDES_VAR, key, " or ".join(close))
    return ("%s: unknown key %r (neither in prod-c8.env.example nor read by serve.sh; engine knobs start with "
            "GLM53_TF_)" % (OVERRIDES_VAR, key))


def check_overrides(overrides, known_keys):
    """Errors in the operator's overrides, one string each, before anything is written.

    An unknown key fails with the closest known names. A GLM53_TF_* key that is not known is
    accepted (new engine knobs reach the ranks by prefix) unless it is within edit distance 2
    of a known key: then it is taken for a typo (add a real new knob that close to an
    existing one to ``known_keys``). An NCCL_* key must be a name NCCL documents (or serve.sh's
    NCCL_PASSTHROUGH). Site keys (HOST and PORT among them: glm53_api_bind, glm53_api_port) and
    serve.sh's run-time variables are refused; values must be a string, number or boolean on
    one line.
    """
    if overrides is None:
        return []
    if not isinstance(overrides, dict):
        return ["%s must be a dict of KEY: value, got %s" % (OVERRIDES_VAR, type(overrides).__name__)]
    known = sorted(set(known_keys) - set(INTERNAL_KEYS))
    errors = []
    for key in sorted(overrides, key=str):
        value = overrides[key]
        if not isinstance(key, str) or not _NAME.match(key):
            errors.append("%s: %r is not a shell variable name" % (OVERRIDES_VAR, key))
            continue
        if key in SITE_SOURCES:
            errors.append("%s: %s is supplied by the site and cannot be overridden; it comes from %s" % (
                OVERRIDES_VAR, key, SITE_SOURCES[key]))
            continue
        if key in INTERNAL_KEYS:
            errors.append("%s: %s is set by serve.sh itself at run time; it cannot be configured" % (OVERRIDES_VAR, key))
            continue
        # NCCL's own names are judged against NCCL's list only: a documented NCCL_IB_TC is no typo of NCCL_IB_HCA.
        if key.startswith(NCCL_PREFIX):
            unknown = "; ".join(nccl_problems([key], OVERRIDES_VAR, SERVE_NCCL_KEYS))
        else:
            unknown = _unknown(key, known)
        if unknown:
            errors.append(unknown)
            continue
        if not isinstance(value, (str, int, float)):
            errors.append("%s: %s must be a string, number or boolean, got %s" % (
                OVERRIDES_VAR, key, "null" if value is None else type(value).__name__))
            continue
        text = env_value(value)
        if "\n" in text or "\r" in text or "\0" in text:
            errors.append("%s: %s must be one line (no newline or NUL in the value)" % (OVERRIDES_VAR, key))
        elif key in WHOLE_NUMBER_KEYS and (isinstance(value, bool) or not _WHOLE.match(text)):
            errors.append("%s: %s must be a whole number >= 0 (serve.sh compares it in bash arithmetic), got %r"
                          % (OVERRIDES_VAR, key, value))
    return errors


def memory_gate_gib(text):
    """MEM_GATE_GIB as a rendered prod.env gives it (0: no gate), the MemFree a start waits for."""
    value = effective(parse_env(text)).get("MEM_GATE_GIB", "0") or "0"
    if not _WHOLE.match(value):
        raise ValueError("prod.env: MEM_GATE_GIB=%r is not a whole number of GiB" % value)
    return int(value)


def placeholder_errors(values):
    """serve.sh refuses to start while one of its required keys still holds a ``<...>`` placeholder."""
    return ["prod.env: %s is still the placeholder %r; serve.sh refuses to start (the site value is missing)"
            % (key, values[key]) for key in PLACEHOLDER_KEYS if key in values and _PLACEHOLDER.search(values[key])]


def intended(example_text, site, overrides):
    """The values the rendered file must give when sourced: example, then site, then overrides."""
    values = effective(parse_env(example_text))
    for key, value in (site or {}).items():
        values[key] = env_value(value)
    for key, value in (overrides or {}).items():
        values[key] = env_value(value)
    return values


def _header_lines(header):
    lines = []
    for line in (header or "").rstrip("\n").split("\n"):
        lines.append(line if line.startswith("#") else ("# " + line).rstrip())
    return lines


def _assignment(key, value, comment="", column=0):
    """``KEY=value``, with a trailing comment kept at its old column when it still fits."""
    line = "%s=%s" % (key, shell_quote(value))
    if not comment:
        return line
    return line.ljust(column - 1) + " " + comment if len(line) < column - 1 else line + "  " + comment


def render_env(example_text, site, overrides, header):
    """The kit's ``config/prod.env``: the example line by line with the site's values and the
    overrides put in. Unchanged lines stay byte for byte (comments included); a key the
    example sets twice appears once, where its value in force (the last) is set; keys the
    example lacks follow at the end. ``header`` (str, lines get ``# ``) goes first.
    Raises EnvSyntaxError for an example ``source`` cannot read statically, TypeError or
    ValueError for a value the file cannot hold (run check_overrides first)."""
    entries = parse_env(example_text)
    shipped = effective(entries)
    site = dict((key, env_value(value)) for key, value in (site or {}).items())
    overrides = dict((key, env_value(value)) for key, value in (overrides or {}).items())
    wanted = dict(shipped, **site)
    wanted.update(overrides)
    for key, value in wanted.items():
        if not _NAME.match(key):
            raise ValueError("%r is not a shell variable name" % key)
        if "\n" in value or "\r" in value or "\0" in value:
            raise ValueError("%s: the value must be one line" % key)
    last = dict((entry["key"], index) for index, entry in enumerate(entries) if entry["type"] == "assign")
    out = _header_lines(header) + [""]
    for index, entry in enumerate(entries):
        if entry["type"] != "assign":
            out.append(entry["line"])
            continue
        key = entry["key"]
        if last[key] != index:
            # The example sets it again below; bash keeps only that one.
            out.append("# %s: set once further down (the value in force)." % key)
            continue
        value = wanted[key]
        if value == entry["value"]:
            out.append(entry["line"])
            continue
        if key in overrides and overrides[key] != shipped.get(key):
            was = shell_quote(shipped[key]) or "empty"
            out.append("# %s: overridden by %s (shipped: %s)" % (key, OVERRIDES_VAR, was))
        column = len(entry["line"]) - len(entry["comment"])
        out.append(_assignment(key, value, entry["comment"], column))
    extra_site = sorted(key for key in site if key not in shipped)
    extra = sorted(key for key in overrides if key not in shipped and key not in site)
    if extra_site:
        out += ["", "# Site values the example does not set."]
        out += [_assignment(key, wanted[key]) for key in extra_site]
    if extra:
        out += ["", "# Set by %s; not in the example (serve.sh or engine defaults otherwise)." % OVERRIDES_VAR]
        out += [_assignment(key, wanted[key]) for key in extra]
    return "\n".join(out) + "\n"


def _hf_dir(facts, node, weights):
    """A node's HF cache (host path) from its hf_weights facts, a path, or weights.nodes."""
    if facts is None:
        facts = ((weights or {}).get("nodes") or {}).get(node)
    if isinstance(facts, dict):
        facts = facts.get("hf_cache_dir")
    return facts


def site_env(cluster, weights, image, head=None, worker=None, api_bind=None, api_port=None):
    """The site's values for prod.env from the cluster contract, the hf_weights facts and the
    site values glm53_api_bind / glm53_api_port (HOST, PORT).

    ``cluster``: the contract (head, workers, ssh_user, master_port, nodes{node: {link_address,
    env{NCCL_SOCKET_IFNAME, NCCL_IB_HCA}}}). ``weights``: the hf_weights facts (``model_path``,
    ``drafter_path`` container paths, '' = drafter refused; optionally ``nodes{node: {hf_cache_dir}}``).
    ``head``/``worker``: that node's hf_weights facts (a dict with ``hf_cache_dir``, optionally
    ``model_path``) or its HF cache path; None = ``weights.nodes[node]``. ``api_bind``/``api_port``:
    the head's glm53_api_bind and glm53_api_port; None = the site contract's default (its only one).
    Returns ``(site, errors)``; errors are strings, nothing is raised for bad input.
    """
    errors = []
    site = {}
    if not isinstance(cluster, dict):
        return {}, ["tensorfold: the cluster contract is missing (run the cx7_link preflight first)"]
    # The same check as where the contract is written and read: nothing below sees a None address.
    problems = contract_problems(cluster)
    if problems:
        return {}, ["tensorfold: the cluster contract is unusable (%s); rerun the preflight (playbooks/preflight.yml "
                    "-e path=tensorfold)" % "; ".join(problems)]
    weights = weights if isinstance(weights, dict) else {}
    head_name = cluster.get("head")
    workers = list(cluster.get("workers") or [])
    if len(workers) != 1:
        errors.append("tensorfold: the kit serves exactly two Sparks (one head, one worker); the cluster has %d "
                      "worker(s)%s. Use -e path=vllm for more nodes." % (
                          len(workers), (" (" + ", ".join(str(w) for w in workers) + ")") if workers else ""))
        return site, errors
    worker_name = workers[0]
    nodes = cluster.get("nodes") or {}
    head_node = nodes.get(head_name) or {}
    worker_node = nodes.get(worker_name) or {}

    head_ip = head_node.get("link_address") or cluster.get("master_address")
    worker_ip = worker_node.get("link_address")
    if not head_ip:
        errors.append("tensorfold: the cluster contract has no link address for the head %s" % head_name)
    else:
        site["HEAD_IP"] = head_ip
    if not worker_ip:
        errors.append("tensorfold: the cluster contract has no link address for the worker %s" % worker_name)
    else:
        user = cluster.get("ssh_user") or ""
        site["WORKER_SSH"] = "%s@%s" % (user, worker_ip) if user else worker_ip

    head_env = head_node.get("env") or {}
    worker_env = worker_node.get("env") or {}
    for key in ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"):
        if not head_env.get(key):
            errors.append("tensorfold: the cluster contract has no %s for the head %s" % (key, head_name))
            continue
        site[key] = head_env[key]
        if worker_env.get(key) and worker_env[key] != head_env[key]:
            errors.append("tensorfold: %s differs between the head (%s) and the worker (%s); serve.sh gives both "
                          "ranks the head's value, so the link netdevs must have the same names" % (
                              key, head_env[key], worker_env[key]))
    if cluster.get("master_port") not in (None, ""):
        site["MASTER_PORT"] = str(cluster["master_port"])

    for key, node, facts in (("HEAD_HF", head_name, head), ("WORKER_HF", worker_name, worker)):
        path = _hf_dir(facts, node, weights)
        if not path:
            errors.append("tensorfold: no HF cache directory for %s (%s); run the hf_weights role first" % (node, key))
        elif not str(path).startswith("/"):
            errors.append("tensorfold: %s must be an absolute host path on %s, found %r (expand ~ on the node)"
                          % (key, node, path))
        else:
            site[key] = str(path)

    for key, fact in (("MODEL_PATH", "model_path"), ("DRAFTER", "drafter_path")):
        path = weights.get(fact)
        if path is None or (key == "MODEL_PATH" and not path):
            errors.append("tensorfold: the hf_weights facts lack %s (for %s)" % (fact, key))
        elif path and not str(path).startswith(CONTAINER_HF + "/"):
            errors.append("tensorfold: %s must be a container path under %s (the HF cache mount), found %r"
                          % (key, CONTAINER_HF, path))
        else:
            site[key] = str(path)
    for node, facts in ((head_name, head), (worker_name, worker)):
        own = facts.get("model_path") if isinstance(facts, dict) else None
        if own and weights.get("model_path") and own != weights["model_path"]:
            errors.append("tensorfold: %s holds MODEL_PATH %s, not %s; both ranks load the same snapshot (rerun "
                          "hf_weights)" % (node, own, weights["model_path"]))

    if not image:
        errors.append("tensorfold: no image name (tensorfold_image)")
    else:
        site["IMAGE"] = str(image)

    # Checked here too: a role run on its own never went through playbooks/path.yml.
    api_bind = site_default(_api_endpoint.BIND_VAR) if api_bind is None else api_bind
    api_port = site_default(_api_endpoint.PORT_VAR) if api_port is None else api_port
    wrong = _api_endpoint.problems(api_bind, api_port)
    if wrong:
        errors += wrong
    else:
        site.update(_api_endpoint.env(api_bind, api_port))
    return site, errors
