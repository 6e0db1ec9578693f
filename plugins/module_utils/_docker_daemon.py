# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers: Docker's daemon config (``/etc/docker/daemon.json``) as data. Not a public API.

Pure functions: read the config, judge whether a runtime is registered (and the
default), predict what ``nvidia-ctk runtime configure --runtime=docker`` writes, and
list the keys a configure step changed that it had no business touching. The
operator's own keys (``log-opts``, ``default-shm-size``, ``data-root`` ...) must
come out of a configure step equal in meaning, whatever the formatting.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

DEFAULT_PATH = "/etc/docker/daemon.json"
# What nvidia-ctk registers: the runc shim found on dockerd's PATH.
RUNTIME_PATH = "nvidia-container-runtime"


def parse_config(text):
    """``(config, error)`` of daemon.json text: ``text`` None (no file) or blank reads as
    an empty config, as dockerd and nvidia-ctk read it; anything but a JSON object is an error."""
    if text is None or not text.strip():
        return {}, None
    try:
        config = json.loads(text)
    except ValueError as exc:
        return None, "not valid JSON (%s)" % exc
    if not isinstance(config, dict):
        return None, "not a JSON object (found %s)" % type(config).__name__
    return config, None


def render(config):
    """The config as nvidia-ctk writes it (4-space indent), for diffs."""
    return json.dumps(config, indent=4, sort_keys=True) + "\n"


def runtime_status(config, runtime="nvidia", set_default=False):
    """Whether ``runtime`` is registered in ``config`` (and the default when ``set_default``).

    ``{registered, path, default_runtime, is_default, configured, missing}``: ``configured``
    is what the role acts on; ``missing`` says what is absent, in words. A registered
    runtime with any non-empty path counts (an operator may point it at an absolute path).
    """
    runtimes = config.get("runtimes") if isinstance(config, dict) else None
    entry = runtimes.get(runtime) if isinstance(runtimes, dict) else None
    path = entry.get("path") if isinstance(entry, dict) else None
    registered = bool(path)
    default_runtime = config.get("default-runtime") if isinstance(config, dict) else None
    is_default = default_runtime == runtime
    missing = []
    if not registered:
        missing.append("runtimes.%s" % runtime)
    if set_default and not is_default:
        missing.append('"default-runtime": "%s"' % runtime)
    return {
        "registered": registered,
        "path": path,
        "default_runtime": default_runtime,
        "is_default": is_default,
        "configured": not missing,
        "missing": missing,
    }


def predicted_config(config, runtime="nvidia", set_default=False, path=RUNTIME_PATH):
    """The config after ``nvidia-ctk runtime configure --runtime=docker [--set-as-default]``:
    the runtime entry added (an existing one is left as it is), the default set when
    asked, every other key untouched."""
    after = copy.deepcopy(config or {})
    runtimes = after.get("runtimes")
    if not isinstance(runtimes, dict):
        runtimes = after["runtimes"] = {}
    if not (isinstance(runtimes.get(runtime), dict) and runtimes[runtime].get("path")):
        runtimes[runtime] = {"args": [], "path": path}
    if set_default:
        after["default-runtime"] = runtime
    return after


def _same(a, b):
    """Equal as JSON values: ``1``, ``1.0`` and ``true`` differ, key order does not matter."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def foreign_changes(before, after, runtime="nvidia", set_default=False):
    """Keys of ``before`` that ``after`` lost or changed, other than the ones configuring
    ``runtime`` may change (``runtimes.<runtime>``, and ``default-runtime`` with
    ``set_default``). Sorted strings such as ``removed log-opts`` or ``changed data-root``;
    empty when every other key survived equal in meaning."""
    allowed = set(["default-runtime"]) if set_default else set()
    out = []
    for key in sorted(before):
        if key in allowed:
            continue
        if key not in after:
            out.append("removed %s" % key)
        elif key == "runtimes" and isinstance(before[key], dict) and isinstance(after[key], dict):
            for name in sorted(before[key]):
                if name == runtime:
                    continue
                if name not in after[key]:
                    out.append("removed runtimes.%s" % name)
                elif not _same(after[key][name], before[key][name]):
                    out.append("changed runtimes.%s" % name)
        elif not _same(after[key], before[key]):
            out.append("changed %s" % key)
    return out
