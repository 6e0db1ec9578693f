#!/usr/bin/env python
"""The Spark lab's command line and import name; the lab itself is the package
lab/sparklab/ (its docstring says what the lab is and how to run it).

`python lab/spark_lab.py up|down|reset|status|inventory` and `import spark_lab` (with lab/
on sys.path: tests/integration, benchmarks, tests/unit/lab) keep working as when the lab was
this one file: every name it had is re-exported here. Each is bound where it is defined
(sparklab.<module>) and looked up there, so patch it there: rebinding it here changes
nothing the lab does.
"""

from __future__ import annotations

import sys
from pathlib import Path

# lab/ on the path: sparklab and the modules it imports (baseline, host_tools) live there.
sys.path.insert(0, str(Path(__file__).resolve().parent))
# pylint: disable=wrong-import-position,unused-import
# ruff: noqa: E402, F401
from sparklab.cli import main
from sparklab.commands import LabError, docker, inspect, log, node_exec, run
from sparklab.daemons import terminate
from sparklab.health import node_health, status
from sparklab.host import ENGINE_BIP, ENGINE_POOL, debian_mirror, engine_answers, ensure_engine, ensure_tools
from sparklab.images import (
    PYTORCH_DIR, PYTORCH_IMAGE, drop_other_tags, ensure_images, ensure_images_in_node, ensure_pytorch_image,
    image_exists, tree_hash,
)  # fmt: skip
from sparklab.inventory import ensure_inventory, inventory_files, inventory_path
from sparklab.labgit import (
    GIT_COMMITS, GIT_DATES, GIT_ENV, GIT_HOST, GIT_LOG, GIT_PID, GIT_PORT, GIT_ROOT, GIT_URL, OVERLAY_REVISION, SIM,
    ensure_git_repos, ensure_git_server, git, git_daemon_pid, git_served, git_server_status, is_lab_git_daemon,
    revised_overlay, shown, sim_source, source_files, stop_git_server, write_commit,
)  # fmt: skip
from sparklab.labhub import (
    HUB_BENCH_ENV, HUB_DATA, HUB_HOST, HUB_LOG, HUB_PID, HUB_PORT, HUB_SCRIPT, HUB_URL, ensure_hub, hub_answer,
    hub_matches, hub_pid, hub_status, hub_wanted, is_hub_process, stop_hub,
)  # fmt: skip
from sparklab.layout import (
    DEFAULT_NODES, HEAD, IMAGE_DIR, INVENTORY, KEY, KNOWN_HOSTS, LAB, LAB_ID, LAB_ID_ENV, LABEL, LINK_NETDEVS, MAX_LABS,
    MAX_NODES, NODE_MEMORY, NODES, NODES_ENV,
    REPO, STATE, WORKER, Node, inner_network, lab_nodes, make_node, node_count, node_index, node_name,
)  # fmt: skip
from sparklab.lifecycle import Lab, down, locked, reset, restore_baseline, up
from sparklab.networks import (
    NETWORKS, bridge_name, cable_rules, ensure_cable_rules, ensure_networks, network_ok, remove_cable_rules,
)  # fmt: skip
from sparklab.nodes import (
    check_ssh, create_node, daemon_json, ensure_busybox, ensure_keys, ensure_node, existing_nodes, host_key, hosts_text,
    per_node, recreate_reason, remove_extra_nodes, ssh_cmd, wait_booted, write_if_changed,
)  # fmt: skip

if __name__ == "__main__":
    sys.exit(main())
