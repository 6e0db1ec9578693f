# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""cx7_link: checks of each node on its own (controller side): reachability, the port
map, GPU, known-bad kernels, memory and disk. Not a public API.

Serving mode: when a node's CUDA processes belong to our own engine's containers
(by label or name, ``module_utils/_engines``: either path's), the GPU-idle and memory checks pass, so a converged rerun of
the preflight passes while the model serves. A foreign process still fails.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dgx_spark.glm53.plugins.module_utils._engines import path_of
from ansible_collections.dgx_spark.glm53.plugins.module_utils._human import human_bytes
from ansible_collections.dgx_spark.glm53.plugins.module_utils._meminfo import memory_summary, parse_meminfo
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_links import nodes_of
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_parsers import (
    GIB,
    command_error,
    parse_compute_apps,
    parse_gpus,
    timed_out,
)
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._known_issues import driver_issues, kernel_issues
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._preflight_result import (
    FAIL,
    OK,
    WARN,
    passed_or,
    result,
    skipped,
)


def check_nodes(config, obs_by_node):
    out = []
    for node in nodes_of(config):
        obs = obs_by_node.get(node)
        if not obs or not obs.get("reachable"):
            out.append(result(
                "node.reachable", node, FAIL, FAIL, expected="node answers over Ansible",
                found=(obs or {}).get("error") or "unreachable or not in the inventory",
                fix="make %s reachable over ssh as the deploy user (ansible -m ping %s) and rerun" % (node, node),
                summary="no observations from this node"))
            continue
        out.append(result("node.reachable", node, OK, FAIL, expected="node answers over Ansible", found="answered",
                          summary="reachable"))
        if obs.get("ports") is None:
            out.append(result(
                "node.link_facts", node, FAIL, FAIL, expected="the RDMA port map (ibdev2netdev or sysfs)",
                found=obs.get("link_error") or "no port map",
                fix="install rdma-core/iproute2 or fix the error above, then rerun",
                summary="could not read the RDMA port map"))
        else:
            out.append(result("node.link_facts", node, OK, FAIL, expected="the RDMA port map (ibdev2netdev or sysfs)",
                              found="%d RDMA port(s) via %s" % (len(obs["ports"]), obs.get("link_source")),
                              summary="port map read"))
    return out


def _engine_container(obs, pid):
    """The container of ours a GPU process runs in, or None."""
    container = ((obs.get("app_containers") or {}).get(str(pid))) or None
    if container and path_of(container.get("name"), container.get("labels")) is not None:
        return container
    return None


def serving(obs):
    """Names of our engine's containers holding this node's GPU (serving mode), else []."""
    apps_reg = (obs or {}).get("apps") or {}
    if apps_reg.get("rc") != 0:
        return []
    names = []
    for app in parse_compute_apps(apps_reg.get("stdout")):
        container = _engine_container(obs, app["pid"])
        if container and container["name"] not in names:
            names.append(container["name"])
    return names


def check_gpus(config, obs_by_node):
    out = []
    want = config.get("gpu_name") or "NVIDIA GB10"
    allow = [re.compile(p) for p in config.get("gpu_process_allow") or []]
    drivers = {}
    for node in nodes_of(config):
        obs = obs_by_node.get(node)
        if not obs or not obs.get("reachable"):
            continue
        reg = obs.get("gpu") or {}
        gpus = parse_gpus(reg.get("stdout")) if reg.get("rc") == 0 else []
        names = sorted(set(g["name"] for g in gpus))
        ok = bool(gpus) and all(g["name"] == want for g in gpus)
        if timed_out(reg):
            fix = ("nvidia-smi hangs on %s: the driver is wedged (a stuck CUDA process or a GPU fault); check "
                   "`dmesg` for Xid errors and reboot the node" % node)
        else:
            fix = "install the NVIDIA driver (stock DGX OS has it) and make sure `nvidia-smi` works as the deploy user"
        out.append(result(
            "gpu.model", node, passed_or(FAIL, ok), FAIL, expected=want,
            found=",".join(names) if gpus else "nvidia-smi failed: %s" % command_error(reg), fix=fix,
            summary="GPU %s" % (names[0] if names else "not visible")))
        if gpus:
            driver = gpus[0]["driver"]
            drivers[node] = driver
            for issue in driver_issues(driver) or [None]:
                out.append(result(
                    "gpu.driver_version", node, OK if issue is None else issue["level"], WARN,
                    expected="a driver without known GB10 problems", found=driver,
                    fix=issue["fix"] if issue else "", summary="driver %s" % driver))
        out.append(_check_idle(config, node, obs, allow))
    head = config["head"]
    for node in config["workers"]:
        if head not in drivers or node not in drivers:
            continue
        same = drivers[node] == drivers[head]
        out.append(result(
            "gpu.driver_match", node, passed_or(WARN, same), WARN,
            expected="driver %s as on %s" % (drivers[head], head), found=drivers[node],
            fix="install the same driver version on every Spark (NCCL across mismatched drivers is untested)",
            summary="driver %s" % ("matches" if same else "differs from %s" % head)))
    return out


def _check_idle(config, node, obs, allow):
    apps_reg = obs.get("apps") or {}
    if apps_reg.get("rc") != 0:
        return result("gpu.idle", node, FAIL, FAIL, expected="no foreign CUDA compute process",
                      found="cannot list: %s" % command_error(apps_reg),
                      fix="make `nvidia-smi --query-compute-apps=pid,name --format=csv,noheader` work",
                      summary="GPU process list unreadable")
    apps = parse_compute_apps(apps_reg.get("stdout"))
    ours = [a for a in apps if _engine_container(obs, a["pid"])]
    foreign = [a for a in apps if a not in ours and not any(rx.search(a["name"]) for rx in allow)]
    if foreign and obs.get("engine_error"):
        found = "%s (could not tell containers apart: %s)" % (_apps_text(foreign), obs["engine_error"])
    else:
        found = _apps_text(foreign) if foreign else (
            "only our engine: %s" % ", ".join(sorted(set(_engine_container(obs, a["pid"])["name"] for a in ours)))
            if ours else "none")
    return result(
        "gpu.idle", node, passed_or(FAIL, not foreign), FAIL, expected="no foreign CUDA compute process",
        found=found,
        fix="stop it first (another engine, a notebook, a benchmark): only one GLM-5.3 stack fits in GPU memory; "
            "`nvidia-smi` on %s shows it" % node,
        summary=("%d foreign CUDA process(es)" % len(foreign)) if foreign else ("serving" if ours else "GPU idle"))


def _apps_text(apps):
    return ",".join("pid %s (%s)" % (a["pid"], a["name"]) for a in apps)


def check_kernel(config, obs_by_node):
    """Known-bad kernels, confirmed by their tell (data in _known_issues)."""
    out = []
    for node in nodes_of(config):
        obs = obs_by_node.get(node)
        if not obs or not obs.get("reachable"):
            continue
        release = (obs.get("osrelease") or "").strip()
        meminfo = parse_meminfo(obs.get("meminfo") or "")
        issues = kernel_issues(release, meminfo, obs.get("cmdline") or "")
        for entry, found in issues:
            out.append(result(entry["id"], node, entry["level"], entry["level"],
                              expected="a kernel without known RoCE problems", found=found, fix=entry["fix"],
                              summary=entry["summary"]))
        if not issues:
            out.append(result("node.kernel", node, OK, FAIL, expected="a kernel without known RoCE problems",
                              found=release or "unknown", summary="kernel %s" % (release or "unknown")))
    return out


def check_memory(config, obs_by_node):
    out = []
    gates = (("memory.mem_free", "mem_free", "MemFree", config.get("mem_free_gib")),
             ("memory.mem_available", "mem_available", "MemAvailable", config.get("mem_available_gib")))
    for node in nodes_of(config):
        obs = obs_by_node.get(node)
        if not obs or not obs.get("reachable"):
            continue
        text = obs.get("meminfo")
        summary = memory_summary(parse_meminfo(text)) if text else None
        engine = serving(obs)
        for name, key, label, gate in gates:
            if gate is None:
                continue
            if not summary or not summary.get(key):
                out.append(result(name, node, WARN, WARN, expected=">= %s GiB %s" % (gate, label), found="unreadable",
                                  fix="make /proc/meminfo readable", summary="%s unknown" % label))
                continue
            # In GiB, as the gate is.
            have = human_bytes(summary[key], unit="GiB")
            if engine:
                out.append(result(name, node, OK, WARN, expected=">= %s GiB %s before a start" % (gate, label),
                                  found="%s while our engine runs (%s)" % (have, ", ".join(engine)),
                                  summary="serving: gate applies before a start"))
                continue
            ok = summary[key] >= float(gate) * GIB
            out.append(result(
                name, node, passed_or(WARN, ok), WARN, expected=">= %s GiB %s" % (gate, label),
                found=have,
                fix="close desktop sessions, browsers and containers on %s; the model needs the memory when it loads "
                    "(page cache is dropped right before the engine starts)" % node,
                summary="%s %s" % (label, have)))
    return out


def disk_groups(entries):
    """Group probe entries by filesystem (``dev``) and sum what each must still hold.

    ``present`` (this model's bytes already there, e.g. on a rerun) counts toward its
    entry's need, up to the need.
    """
    groups = {}
    order = []
    for entry in entries:
        key = entry.get("dev")
        if key not in groups:
            groups[key] = {"mount": entry.get("mount"), "free": entry.get("free"), "need": 0, "present": 0,
                           "names": [], "paths": []}
            order.append(key)
        group = groups[key]
        need = int(entry.get("need") or 0)
        present = min(need, int(entry.get("present") or 0))
        group["need"] += need - present
        group["present"] += present
        group["names"].append(entry.get("name"))
        group["paths"].append(entry.get("path"))
    return [groups[k] for k in order]


def check_disk(config, obs_by_node):
    out = []
    for node in nodes_of(config):
        obs = obs_by_node.get(node)
        if not obs or not obs.get("reachable"):
            continue
        probe = obs.get("disk")
        if probe is None:
            out.append(skipped("disk.free", node, FAIL, "node.reachable"))
            continue
        for entry in [e for e in probe if e.get("error")]:
            out.append(result("disk.free", node, FAIL, FAIL, expected="free space at %s readable" % entry.get("path"),
                              found=entry["error"], fix="create the directory or fix its permissions",
                              summary="cannot stat %s" % entry.get("path")))
        for group in disk_groups([e for e in probe if not e.get("error")]):
            ok = group["free"] >= group["need"]
            what = "+".join(group["names"])
            # In GB, the unit the weight sizes are quoted in.
            free, need = human_bytes(group["free"], unit="GB"), human_bytes(group["need"], unit="GB")
            short = human_bytes(group["need"] - group["free"], unit="GB")
            found = "%s free" % free
            if group["present"]:
                found += " (%s of this path's data already there counted)" % human_bytes(group["present"], unit="GB")
            out.append(result(
                "disk.free", node, passed_or(FAIL, ok), FAIL,
                expected=">= %s free on %s for %s (path %s)" % (need, group["mount"], what, config.get("path")),
                found=found,
                fix="free %s on %s (%s) or point the %s directories at a larger disk"
                    % (short, group["mount"], ", ".join(group["paths"]), what),
                summary="%s: %s free for %s" % (group["mount"], free, what)))
    return out
