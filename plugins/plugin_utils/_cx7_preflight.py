# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""cx7_link on the controller: turn what the nodes returned into observations, plan
the probes between nodes, and judge everything. Not a public API.

The role gathers each node in one round trip (``spark_node_facts``), asks
:func:`probe_plan` what each node probes, runs those probes in one more round trip
per node (``link_probe``), then calls :func:`evaluate`. Config keys: head, workers,
path, master_port, mtu, ssh_user, ssh_timeout, port_probe_timeout, ping_count, ping_timeout, gpu_name,
gpu_process_allow, mem_free_gib, mem_available_gib and
``nodes`` ({node: {netdev, second_netdev, address}}: each node's configured link).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dgx_spark.glm53.plugins.module_utils._cluster_contract import validate, wanted_digests
from ansible_collections.dgx_spark.glm53.plugins.module_utils._link_probe import PING_INTERVAL, ping_deadline
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_links import (
    check_link_pairs,
    check_link_ports,
    check_netdev_names,
    check_pings,
    link_addresses,
    links_of,
    nodes_of,
    ping_plan,
    port_for,
)
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_nccl import (
    check_gid_uniform,
    cluster_contract,
    nccl_settings,
    usable_links,
)
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_nodes import (
    check_disk,
    check_gpus,
    check_kernel,
    check_memory,
    check_nodes,
)
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_reach import SSH_MARKER, check_master_port, check_ssh
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._preflight_result import enforce_skips, summarize

# A module run's start - the connection, the payload, Python - is seconds on a loaded machine:
# the probes' listener allows it for every run.
PROBE_START_SECONDS = 20


def _by_item(results):
    """Each node's result: ``{node: result}`` as given (filter cx7_link_by_node: what the role
    registered on each node), or the loop results of a task delegated to each node in turn
    (keyed by ``item``)."""
    if isinstance(results, dict):
        return dict((node, entry) for node, entry in results.items() if isinstance(entry, dict))
    out = {}
    for entry in results or []:
        if isinstance(entry, dict) and entry.get("item") is not None:
            out[entry["item"]] = entry
    return out


def observation(node_cfg, facts, probe=None, listen=None):
    """One node's observation from its registered results (any may be missing)."""
    obs = dict(node_cfg or {})
    if not facts or facts.get("unreachable") or facts.get("failed") or "link" not in facts:
        obs.update(reachable=False, error=_reason(facts))
        return obs
    link = facts.get("link") or {}
    ports = link.get("ports")
    obs.update(
        reachable=True,
        ports=ports if not link.get("error") else None,
        link_source=link.get("source"),
        link_error=link.get("error"),
        sysfs_root=link.get("sysfs_root"),
        gpu=facts.get("gpu"),
        apps=facts.get("apps"),
        app_containers=facts.get("app_containers") or {},
        engine_error=facts.get("engine_error"),
        meminfo=facts.get("meminfo") or "",
        osrelease=facts.get("osrelease") or "",
        cmdline=facts.get("cmdline") or "",
        disk=facts.get("disk"),
        contract_files=facts.get("contract_files") or {},
    )
    if probe and not probe.get("skipped") and not probe.get("unreachable"):
        obs.update(pings=probe.get("pings") or [], connect=probe.get("connect"), ssh=probe.get("ssh") or [])
    if listen and not listen.get("skipped"):
        obs["listen"] = listen.get("listen")
    elif probe and not probe.get("skipped") and probe.get("listen") is not None:
        # The head listened within its own probe (probe_plan's `together`).
        obs["listen"] = probe["listen"]
    return obs


def _reason(facts):
    if not facts:
        return "not gathered"
    msg = (facts.get("msg") or "").strip()
    if facts.get("unreachable"):
        return "unreachable: %s" % (msg.splitlines()[-1] if msg else "no answer over ssh")
    return msg.splitlines()[-1] if msg else "gathering failed"


def observations(config, facts_results, probe_results=None, listen=None):
    facts = _by_item(facts_results)
    probes = _by_item(probe_results)
    cfg = config.get("nodes") or {}
    out = {}
    for node in nodes_of(config):
        out[node] = observation(cfg.get(node), facts.get(node), probes.get(node),
                                listen if node == config["head"] else None)
    return out


def probe_plan(config, facts_results, together=False):
    """``{listen, nodes: {node: {pings, connect, ssh, listen}}}`` from every node's facts.

    The head listens on the master port for every worker whose primary link is Up with an
    address; each such worker connects; the head ssh-es to each worker's link address.
    ``together``: every node probes in the same task at once (one batch, forks for all): the
    head listens within its own probe (``nodes[head].listen``), and each worker retries its
    connect for PROBE_START_SECONDS more, room for the head's module to start. Otherwise the
    listener (``listen``) is started in the background before any node probes and collected
    after, so the order and pace of the probes (forks=1, serial) do not matter.
    """
    obs_by_node = observations(config, facts_results)
    head = config["head"]
    primary = links_of(config, obs_by_node)[0]["netdev"]
    chosen = link_addresses(config, obs_by_node, primary)

    def ready(node):
        port = port_for(obs_by_node.get(node), primary)
        return bool(port) and port.get("state") == "Up" and bool(chosen.get(node))

    workers = [w for w in config["workers"] if ready(w)]
    master = chosen.get(head) if ready(head) else None
    timeout = int(config.get("port_probe_timeout") or 5)
    if together:
        timeout += PROBE_START_SECONDS
    plan = {"listen": None, "nodes": {}}
    user = config.get("ssh_user") or ""
    for node in nodes_of(config):
        entry = {"pings": ping_plan(config, obs_by_node, node), "connect": None, "ssh": [], "listen": None}
        if master and node in workers:
            entry["connect"] = {"address": master, "port": int(config["master_port"]), "timeout": timeout}
        if node == head:
            for worker in workers:
                target = "%s@%s" % (user, chosen[worker]) if user else chosen[worker]
                entry["ssh"].append({"worker": worker, "target": target,
                                     "command": "echo %s; docker ps -q" % SSH_MARKER,
                                     "timeout": int(config.get("ssh_timeout") or 20)})
        plan["nodes"][node] = entry
    if master and workers:
        # The listener ends once every worker came; until then it must outlast the connects.
        # Together: the longest node's probe run (its connects already allow for the head's
        # start). Otherwise the probes run one node after the other: each node's longest
        # deadline plus the start of its module run (seconds on a loaded machine); sized on the
        # connects alone, it expired while the head's ssh probe was still running.
        runs = [_probe_run_seconds(config, entry) for entry in plan["nodes"].values()]
        listen = {"address": master, "port": int(config["master_port"]), "expect": len(workers),
                  "timeout": (max(runs) if together else sum(runs)) + PROBE_START_SECONDS}
        if together:
            plan["nodes"][head]["listen"] = listen
        else:
            plan["listen"] = listen
    return plan


def _probe_run_seconds(config, entry):
    """The longest one node's probe run can take: its probes run side by side, each to its deadline
    (the role's pings at link_probe's default interval)."""
    ping = ping_deadline(int(config.get("ping_count") or 2), PING_INTERVAL, int(config.get("ping_timeout") or 2))
    deadlines = [ping if entry["pings"] else 0, entry["connect"]["timeout"] if entry["connect"] else 0]
    deadlines += [ssh["timeout"] for ssh in entry["ssh"]]
    return max(deadlines) + PROBE_START_SECONDS


def evaluate(config, facts_results, probe_results=None, listen=None):
    """Every check on every node: ``{status, nodes, checks, failures, warnings, nccl, contract, persist}``."""
    obs_by_node = observations(config, facts_results, probe_results, listen)
    checks = []
    for check in (check_nodes, check_kernel, check_netdev_names, check_link_ports, check_link_pairs, check_pings,
                  check_ssh, check_master_port, check_gpus, check_memory, check_disk):
        checks += check(config, obs_by_node)
    links = usable_links(config, obs_by_node, checks)
    settings = nccl_settings(config, obs_by_node, links)
    checks += check_gid_uniform(config, settings)
    report = summarize(enforce_skips(checks), nodes_of(config))
    report["nccl"] = dict((node, value["env"]) for node, value in settings.items())
    report["contract"] = cluster_contract(config, obs_by_node, links, settings)
    report["persist"] = persist_nodes(report["contract"], obs_by_node)
    return report


def persist_nodes(contract, obs_by_node):
    """The nodes whose contract files differ from this contract's (their gather read the files'
    digests): only those are written. A contract ``validate`` refuses goes to every node, so
    cluster_contract refuses it there, naming the problem, before any later role reads it."""
    nodes = sorted(obs_by_node)
    if validate(contract):
        return nodes
    return [node for node in nodes
            if node not in (contract.get("nodes") or {})
            or obs_by_node[node].get("contract_files") != wanted_digests(contract, node)]
