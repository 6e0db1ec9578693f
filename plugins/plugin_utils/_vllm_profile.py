# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_nvfp4 role's engine settings: their types and ranges, the recipe's qualified
profile, and which ``vllm serve`` flags the role sets itself. Not a public API.

The recipe (``LimeChain/glm-5.3-flash-2xdgx-spark-vllm``, ``scripts/rank-tp2.sh``) runs one
profile it qualified on two Sparks and refuses to launch anything else unless
``PROFILE=experimental`` names the opt-out: MTP_TOKENS other than 3 (exit 6), MAX_MODEL_LEN
other than 262144 (exit 7), MAX_NUM_SEQS other than 12 (exit 8), MAX_NUM_BATCHED_TOKENS other
than 8192 (exit 9), GPU_MEMORY_UTILIZATION other than 0.82 (exit 10), an execution mode other
than eager or a reasoning parser other than glm45 (exit 10), extra engine arguments (exit 10).
Experimental MTP_TOKENS must be 0..5 (exit 6). The role keeps the same rule: a deviation under
``qualified`` is an error, under ``experimental`` a warning naming it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import re

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._inputs import found

PREFIX = "vllm_nvfp4_"
PROFILE_VAR = PREFIX + "profile"
EXTRA_ARGS_VAR = PREFIX + "extra_args"
PROFILES = ("qualified", "experimental")
EXECUTION_MODES = ("eager", "graph")

# The recipe's qualified values (rank-tp2.sh); also what an unset variable means.
QUALIFIED = {
    "mtp_tokens": 3,
    "max_model_len": 262144,
    "max_num_seqs": 12,
    "max_num_batched_tokens": 8192,
    "gpu_memory_utilization": 0.82,
    "execution_mode": "eager",
    "reasoning_parser": "glm45",
    "extra_args": [],
}
SETTINGS = tuple(QUALIFIED)

# Whole-number settings: (lowest, highest, what the number is). The MTP range is the recipe's
# experimental one; the others bound what a GB10 and vLLM's scheduler can take at all.
WHOLE = {
    "mtp_tokens": (0, 5, "MTP draft tokens per step; 0 turns speculative decoding off"),
    "max_model_len": (1024, 1048576, "the longest context in tokens"),
    "max_num_seqs": (1, 1024, "requests served at once"),
    "max_num_batched_tokens": (256, 1048576, "tokens per scheduler step"),
}
# vLLM takes this share of the unified memory; above 0.95 the OS and the page cache starve.
GPU_MEMORY = (0.1, 0.95)
_PARSER = re.compile(r"^[a-z0-9_]+$")
_WHOLE_TEXT = re.compile(r"^[+-]?[0-9]+$")
_NUMBER_TEXT = re.compile(r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")

# Every flag of the role's ``vllm serve`` command line, in the recipe's order, and where its
# value comes from. A variable's name means the operator changes it there; anything else is
# the recipe's fixed choice or the cluster's shape, which no variable changes.
_RECIPE = "the recipe (the same for every profile)"
_NODES = "the inventory (the node count: spark_head + spark_workers)"
FLAG_SOURCES = (
    ("--served-model-name", PREFIX + "served_name"),
    ("--host", "glm53_api_bind"),
    ("--port", "glm53_api_port"),
    ("--tensor-parallel-size", _NODES),
    ("--gpu-memory-utilization", PREFIX + "gpu_memory_utilization"),
    ("--max-model-len", PREFIX + "max_model_len"),
    ("--max-num-seqs", PREFIX + "max_num_seqs"),
    ("--max-num-batched-tokens", PREFIX + "max_num_batched_tokens"),
    ("--attention-backend", _RECIPE),
    ("--kv-cache-dtype", _RECIPE),
    ("--block-size", _RECIPE),
    ("--moe-backend", _RECIPE),
    ("--enforce-eager", PREFIX + "execution_mode"),
    ("--skip-mm-profiling", _RECIPE),
    ("--tool-call-parser", _RECIPE),
    ("--enable-auto-tool-choice", _RECIPE),
    ("--reasoning-parser", PREFIX + "reasoning_parser"),
    ("--default-chat-template-kwargs", _RECIPE),
    ("--generation-config", _RECIPE),
    ("--speculative-config", PREFIX + "mtp_tokens"),
    ("--distributed-executor-backend", _RECIPE),
    ("--nnodes", _NODES),
    ("--node-rank", "the cluster contract (each node's rank)"),
    ("--master-addr", "the cluster contract (the head's link address)"),
    ("--master-port", "the cluster contract (cx7_link_master_port_vllm)"),
    ("--headless", "the cluster contract (every rank but 0)"),
)
ROLE_FLAGS = tuple(flag for flag, _source in FLAG_SOURCES)
# Not on the role's command line as a flag, but vLLM moves ``--model X`` to the positional
# model: it would replace the checkpoint the role verified.
REFUSED = dict(FLAG_SOURCES, **{"--model": "the hf_weights facts (the checkpoint, given as the positional model)"})
# vLLM's short spellings of the role's flags (its parser's aliases).
ALIASES = {"-tp": "--tensor-parallel-size", "-n": "--nnodes", "-r": "--node-rank"}


def _var(name):
    return PREFIX + name


def shown(value):
    """A normalized value as the recipe writes it: 12, 0.82, eager, ["--x"]."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def whole(value):
    """An int from an int or a decimal text (``-e`` passes text); None for anything else.
    A bool is no number here although Python counts it as an int."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _WHOLE_TEXT.match(value.strip()):
        return int(value.strip())
    return None


def number(value):
    """A finite float from an int, a float or a decimal text; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        result = float(value)
    elif isinstance(value, str) and _NUMBER_TEXT.match(value.strip()):
        result = float(value.strip())
    else:
        return None
    return result if math.isfinite(result) else None


def flag_of(arg):
    """The role flag an extra argument sets (``--max_num_seqs=16`` -> ``--max-num-seqs``), or None.

    vLLM's parser reads ``_`` as ``-`` in flag names, ``--flag=value``, ``--no-flag`` for a
    boolean, the short aliases with their value attached (``-tp2``), and a unique prefix of a
    long flag as the flag (argparse's abbreviations): each of them would reach a flag the
    role sets, so each counts as that flag."""
    if not isinstance(arg, str) or not arg.startswith("-") or arg == "--":
        return None
    if not arg.startswith("--"):
        for alias in sorted(ALIASES, key=len, reverse=True):
            rest = arg[len(alias):]
            if arg.startswith(alias) and (rest == "" or rest.startswith("=") or rest.isdigit()):
                return ALIASES[alias]
        return None
    name = arg.split("=", 1)[0].replace("_", "-")
    if name in REFUSED:
        return name
    if name.startswith("--no-") and "--" + name[len("--no-"):] in REFUSED:
        return "--" + name[len("--no-"):]
    # A proper prefix of exactly one role flag is argparse's abbreviation of it (an exact
    # name wins in argparse; no vLLM flag we know of is a proper prefix of a role flag).
    longer = [flag for flag in ROLE_FLAGS if flag.startswith(name) and flag != name]
    return longer[0] if len(longer) == 1 and len(name) > 3 else None


def extra_args_problems(value):
    """Why ``vllm_nvfp4_extra_args`` cannot go on the command line: it must be a list of
    strings, none of which is (or spells) a flag the role sets."""
    if not isinstance(value, list):
        return ["%s: expected a list of strings (further vllm serve arguments, one word each), found %s; fix: give a "
                "YAML list, e.g. [\"--enable-prefix-caching\"], or [] for none" % (EXTRA_ARGS_VAR, found(value))]
    problems = []
    for index, arg in enumerate(value):
        if not isinstance(arg, str):
            fix = "drop the empty entry" if arg is None else "quote it (\"%s\")" % arg
            problems.append("%s[%d]: expected a string, found %s; fix: %s" % (EXTRA_ARGS_VAR, index, found(arg), fix))
            continue
        if "\0" in arg or "\n" in arg:
            problems.append("%s[%d]: expected one word on one line, found %s; fix: drop the newline" % (
                EXTRA_ARGS_VAR, index, found(arg)))
            continue
        flag = flag_of(arg)
        if flag is None:
            continue
        source = REFUSED[flag]
        spelled = "" if arg.split("=", 1)[0] == flag else " (as %s)" % arg
        if source.startswith((PREFIX, "glm53_")):
            fix = "drop it from %s and set %s" % (EXTRA_ARGS_VAR, source)
        else:
            fix = "drop it from %s" % EXTRA_ARGS_VAR
        problems.append("%s: %s%s is set by the role from %s; fix: %s" % (EXTRA_ARGS_VAR, flag, spelled, source, fix))
    return problems


def _check(name, value):
    """(normalized value, [errors]) for one setting."""
    var = _var(name)
    if name in WHOLE:
        low, high, what = WHOLE[name]
        converted = whole(value)
        if converted is not None and low <= converted <= high:
            return converted, []
        return value, ["%s: expected a whole number from %d to %d (%s), found %s; fix: set it to %s (the qualified "
                       "value) or another whole number in that range" % (
                           var, low, high, what, found(value), QUALIFIED[name])]
    if name == "gpu_memory_utilization":
        converted = number(value)
        if converted is not None and GPU_MEMORY[0] < converted <= GPU_MEMORY[1]:
            return converted, []
        return value, ["%s: expected a number above %s and at most %s (the share of the unified memory vLLM takes), "
                       "found %s; fix: set it to %s (the qualified value)" % (
                           var, GPU_MEMORY[0], GPU_MEMORY[1], found(value), QUALIFIED[name])]
    if name == "execution_mode":
        if value in EXECUTION_MODES:
            return value, []
        return value, ["%s: expected eager (--enforce-eager, the recipe's) or graph (CUDA graphs), found %s; fix: "
                       "set it to eager" % (var, found(value))]
    if name == "reasoning_parser":
        if isinstance(value, str) and _PARSER.match(value):
            return value, []
        return value, ["%s: expected a vLLM reasoning parser name (lowercase letters, digits and _), found %s; "
                       "fix: set it to glm45 (the recipe's)" % (var, found(value))]
    problems = extra_args_problems(value)
    return (value if problems else list(value)), problems


def _deviation(name, value):
    """Whether a checked value differs from the qualified one (0.820 and "0.82" do not)."""
    qualified = QUALIFIED[name]
    if isinstance(qualified, float):
        return not math.isclose(value, qualified, rel_tol=0, abs_tol=1e-9)
    return value != qualified


def profile_problems(values):
    """``{errors, warnings, normalized}`` for the role's engine settings.

    ``values``: the role's variables by their names (``vllm_nvfp4_profile``,
    ``vllm_nvfp4_mtp_tokens``, ...); an absent one means its qualified value (the role's
    defaults are those). Text from ``-e`` counts as the number it spells; a bool, a list for a
    number, or text that spells no number is refused. Each error names the variable, what was
    expected, what was found and the fix. ``normalized`` has the settings by their short names
    (``mtp_tokens``, ..., and ``profile``) as int, float, str and list, for the command line.
    """
    values = values if isinstance(values, dict) else {}
    errors, warnings, normalized = [], [], {}
    profile = values.get(PROFILE_VAR, "qualified")
    if profile not in PROFILES:
        errors.append("%s: expected qualified (the recipe's values, the default) or experimental (your own values, "
                      "not qualified), found %s; fix: set it to qualified" % (PROFILE_VAR, found(profile)))
    normalized["profile"] = profile
    deviations = []
    for name in SETTINGS:
        value, wrong = _check(name, values.get(_var(name), QUALIFIED[name]))
        normalized[name] = value
        errors += wrong
        if not wrong and _deviation(name, value):
            deviations.append(name)
    if profile == "qualified":
        for name in deviations:
            qualified = QUALIFIED[name]
            errors.append("%s is %s, the qualified profile runs %s (the recipe's launcher refuses anything else). "
                          "Fix: set it back to %s, or opt out by name with %s: experimental" % (
                              _var(name), shown(normalized[name]), shown(qualified), shown(qualified), PROFILE_VAR))
    elif profile == "experimental":
        warnings.append("experimental profile: not qualified by the recipe (%s: experimental); its results on a "
                        "Spark are yours to qualify" % PROFILE_VAR)
        for name in deviations:
            warnings.append("%s is %s, the qualified profile runs %s" % (
                _var(name), shown(normalized[name]), shown(QUALIFIED[name])))
    return {"errors": errors, "warnings": warnings, "normalized": normalized}
