# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side decisions of the hf_weights role: which repos this path fetches (the
drafter's license gate), whether each node has the space, and the facts the engine
roles read (host and container paths of every snapshot, the drafter decision)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath

from ansible_collections.dgx_spark.glm53.plugins.module_utils._human import human_bytes
from ansible_collections.dgx_spark.glm53.plugins.module_utils._sha import bad_revisions
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_nodes import disk_groups

# Where the kit mounts each node's HF cache root inside the rank containers (serve.sh run_args).
CONTAINER_HF = "/root/.cache/huggingface"
DISTRIBUTIONS = ("mirror", "download")
VERIFY = ("size", "sha256")


def repo_folder(repo_id):
    """``org/name`` -> ``models--org--name`` (the hub cache layout)."""
    return "models--" + repo_id.replace("/", "--")


def select_models(models_by_path, path, accept_drafter):
    """(to fetch, refused drafters) for the serving path."""
    models = list((models_by_path or {}).get(path) or [])
    refused = [m for m in models if m.get("drafter") and not accept_drafter]
    return [m for m in models if m not in refused], refused


def input_errors(path, models_by_path, distribution, verify):
    errors = []
    if path not in (models_by_path or {}):
        errors.append("hf_weights_models has no entry for path %r (it has: %s)"
                      % (path, ", ".join(sorted(models_by_path or {})) or "nothing"))
    if distribution not in DISTRIBUTIONS:
        errors.append("hf_weights_distribution must be one of %s, found %r" % (", ".join(DISTRIBUTIONS), distribution))
    if verify not in VERIFY:
        errors.append("hf_weights_verify must be one of %s, found %r" % (", ".join(VERIFY), verify))
    for entry in (models_by_path or {}).get(path) or []:
        if not isinstance(entry, dict) or not entry.get("repo_id"):
            errors.append("hf_weights_models[%s]: every entry needs repo_id and revision, found %r" % (path, entry))
    errors.extend(("hf_weights_" + message) for message in bad_revisions(
        [m for m in (models_by_path or {}).get(path) or [] if isinstance(m, dict)]))
    return errors


def license_notice(refused, variable="hf_weights_accept_noncommercial_drafter"):
    """The one plain line the play prints when a drafter is left out ('' when none is)."""
    if not refused:
        return ""
    names = ", ".join("%s (%s)" % (m["repo_id"], m.get("license") or "restricted license") for m in refused)
    return ("Drafter not downloaded: %s is licensed for non-commercial use only and %s is false. The engine runs "
            "with DRAFTER= (MTP drafts only, slower). If your use is non-commercial, set %s: true and rerun."
            % (names, variable, variable))


def space_errors(node, entries, path, nothing_changed=True):
    """One message per filesystem on ``node`` that cannot hold what this path still needs.

    ``entries`` are dgx_spark.glm53.disk_space entries; kinds on one filesystem add up, and
    data already there counts toward its own need (the preflight's rule)."""
    out = []
    for entry in entries or []:
        if entry.get("error"):
            out.append("[hf_weights.space] %s: cannot measure free space: %s" % (node, entry["error"]))
    for group in disk_groups([e for e in entries or [] if not e.get("error")]):
        if group["free"] >= group["need"]:
            continue
        what = "+".join(group["names"])
        # In GB, the unit the weight sizes are quoted in.
        need, free, present, short = (human_bytes(value, unit="GB") for value in (
            group["need"], group["free"], group["present"], group["need"] - group["free"]))
        present = (" (%s of it already there, counted)" % present) if group["present"] else ""
        out.append(
            "[hf_weights.space] %s: %s needs %s more on %s for %s (path %s)%s, but %s is free: free %s on %s (%s) or "
            "point glm53_hf_cache_dir / glm53_prepared_dir / glm53_session_dir at a larger disk.%s"
            % (node, node, need, group["mount"], what, path, present, free, short, group["mount"],
               ", ".join(group["paths"]), " Nothing was downloaded." if nothing_changed else ""))
    return out


def snapshot_paths(snapshot_path, repo_id, revision):
    """Host cache root and container snapshot path from a node's snapshot dir
    (``<root>/hub/models--org--name/snapshots/<sha>``)."""
    suffix = "/hub/%s/snapshots/%s" % (repo_folder(repo_id), revision)
    root = snapshot_path[:-len(suffix)] if snapshot_path.endswith(suffix) else posixpath.dirname(snapshot_path)
    return root, CONTAINER_HF + suffix


def held(results):
    """Per model, what a node's hf_snapshot run said: ``[{repo_id, revision, drafter,
    verified, path, bytes, missing, missing_bytes, msg}]`` from a looped task's results."""
    out = []
    for res in results or []:
        item = res.get("item") or {}
        out.append({"repo_id": item.get("repo_id"), "revision": item.get("revision"),
                    "drafter": bool(item.get("drafter")), "verified": bool(res.get("verified")) and not res.get("failed"),
                    "path": res.get("path") or "", "bytes": res.get("bytes"), "missing": res.get("missing") or [],
                    "missing_bytes": res.get("missing_bytes"), "msg": res.get("msg") or ""})
    return out


def force_list(held_models):
    """Files a worker holds at the right size but that failed verification (e.g. flipped
    bytes under sha256), which a size-and-time comparison would skip: re-send them."""
    return [{"repo_id": m["repo_id"], "name": name} for m in held_models or [] for name in m.get("missing") or []]


def weights_facts(path, snapshots, refused):
    """The ``glm53_weights`` fact of one node.

    ``snapshots``: [{repo_id, revision, drafter, path}] as verified on that node."""
    models, roots = [], []
    model_path = drafter_path = ""
    for snap in snapshots or []:
        root, container = snapshot_paths(snap["path"], snap["repo_id"], snap["revision"])
        roots.append(root)
        models.append({"repo_id": snap["repo_id"], "revision": snap["revision"], "drafter": bool(snap.get("drafter")),
                       "host_path": snap["path"], "container_path": container})
        if snap.get("drafter"):
            drafter_path = drafter_path or container
        else:
            model_path = model_path or container
    return {
        "path": path,
        "hf_cache_dir": roots[0] if roots else "",
        "container_hf_cache_dir": CONTAINER_HF,
        "models": models,
        "model_path": model_path,
        "drafter_path": drafter_path,
        "drafter": bool(drafter_path),
        "drafter_refused": [m["repo_id"] for m in refused or []],
    }
