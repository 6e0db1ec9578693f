"""The public operations: up, reset and down, one at a time under the lab lock, and the
Lab that up returns."""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import time
from dataclasses import dataclass, field

import baseline

from sparklab.commands import LabError, docker, inspect, log, node_exec
from sparklab.host import engine_answers, ensure_engine, ensure_tools
from sparklab.images import (
    drop_other_tags, ensure_images, ensure_images_in_node, ensure_pytorch_image, ensure_vllm_base_image,
)
from sparklab.inventory import STATE_SOURCE, ensure_inventory
from sparklab.labgit import GIT_URL, ensure_git_server, stop_git_server
from sparklab.labhub import HUB_URL, ensure_hub, stop_hub
from sparklab.layout import IMAGE_DIR, INVENTORY, KEY, KNOWN_HOSTS, LAB_ID, LABEL, LINK_NETDEVS, NODES, REPO, STATE, Node, lab_nodes, node_count
from sparklab.networks import ensure_cable_rules, ensure_networks, remove_cable_rules
from sparklab.stale import clear_stale_namespaces
from sparklab.nodes import check_ssh, daemon_json, ensure_busybox, ensure_keys, ensure_node, per_node, remove_extra_nodes


@dataclass
class Lab:
    """What `up()` returns and the `lab`/`lab4` fixtures yield."""

    inventory: str = str(INVENTORY)
    key: str = str(KEY)
    known_hosts: str = str(KNOWN_HOSTS)
    # name -> Node, head first, then spark-worker, spark-worker-2, ...
    nodes: dict = field(default_factory=lambda: {n.name: n for n in NODES})
    changes: list = field(default_factory=list)

    @property
    def head(self) -> Node:
        return next(iter(self.nodes.values()))

    @property
    def workers(self) -> list[Node]:
        return list(self.nodes.values())[1:]

    def exec(self, node: str, script: str, user: str = "root", check: bool = True, input=None):
        return node_exec(node, script, user=user, check=check, input=input)


def restore_baseline(lab: list[Node], deploy: bool = False) -> list[str]:
    """Bring every node of `lab` back to its baseline (lab/baseline.py): undo whatever fault
    a killed test left, and with `deploy` also what a deployment leaves. Returns what it
    restored, one entry per fix, [] when the nodes were already there."""
    shipped = IMAGE_DIR / "node" / "rootfs" / "etc" / "glm53-lab"
    gpu_json, links_json = (shipped / "gpu.json").read_text(), (shipped / "links.json").read_text()

    def restore(node: Node) -> list[str]:
        nets = inspect("container", node.name)["NetworkSettings"]["Networks"]
        links = [
            baseline.Link(netdev=LINK_NETDEVS[net], mac=nets[net]["MacAddress"], cidr=f"{getattr(node, attr)}/24")
            for net, attr in (("glm53-lab-link1", "link1"), ("glm53-lab-link2", "link2"))
        ]
        text = baseline.script(links=links, daemon_json=daemon_json(node), gpu_json=gpu_json,
                               links_json=links_json, deploy=deploy)
        proc = node_exec(node.name, text, check=False, timeout=300)
        if proc.returncode != 0:
            raise LabError(f"{node.name}: could not restore the baseline:\n{proc.stdout}{proc.stderr}".rstrip())
        return [f"{node.name}: {line[len('restored: '):]}" for line in proc.stdout.splitlines()
                if line.startswith("restored: ")]

    return per_node(restore, lab)


def reset(nodes: int | None = None) -> list[str]:
    """The baseline with no deployment (tests/integration: before and after each module):
    faults undone, engines emptied, contract and kit state removed. Returns what changed."""
    lab = lab_nodes(node_count(nodes))
    with locked():
        changes = restore_baseline(lab, deploy=True)
    log(f"reset {len(changes)}: " + "; ".join(changes) if changes else "reset: every node was at its baseline")
    return changes


@contextlib.contextmanager
def locked():
    """One lab operation at a time (make, pytest and molecule may overlap)."""
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def up(nodes: int | None = None) -> Lab:
    """Create, repair or resize the lab to exactly `nodes` nodes (default $GLM53_LAB_NODES,
    else 2) and return it. Idempotent: a rerun changes nothing and says so."""
    count = node_count(nodes)
    lab = lab_nodes(count)
    changes: list[str] = []
    t0 = time.time()
    with locked():
        ensure_tools(changes)
        ensure_engine(changes)
        image, base = ensure_images(changes)
        pytorch = ensure_pytorch_image(base, changes)
        vllm_base = ensure_vllm_base_image(pytorch, changes)
        ensure_networks(changes)
        ensure_cable_rules(changes)
        ensure_hub(changes)
        ensure_git_server(changes)
        remove_extra_nodes(count, changes)
        changes += per_node(lambda node: ensure_node(node, image, lab), lab)
        changes += clear_stale_namespaces(lab)
        ensure_keys(lab, changes)
        # A run killed mid-fault leaves it in place: undo it (a deployment stays).
        changes += restore_baseline(lab)
        changes += per_node(ensure_busybox, lab)
        # The kit's base on every node; the vLLM recipe's base only on the head, as a Spark head
        # pulls it: the workers get the built image.
        changes += per_node(lambda node: ensure_images_in_node(node, [pytorch] + ([vllm_base] if node is lab[0] else [])), lab)
        inventory = ensure_inventory(lab, changes)
        # Builds of older recipes, now that no node runs on them.
        drop_other_tags("glm53-lab/node", image)
        drop_other_tags("glm53-lab/node-base", base)
        problems = [p for p in (check_ssh(n) for n in lab) if p]
        if problems:
            raise LabError("lab is up but SSH does not work:\n" + "\n".join(problems))
    if changes:
        log(f"changed {len(changes)}: " + "; ".join(changes))
    else:
        log(f"nothing to change: the {count}-node lab was already up and healthy")
    rel = inventory.relative_to(REPO)
    log(f"{count}-node lab ready in {time.time() - t0:.0f}s; inventory: {rel}  (ansible-playbook -i {rel} ...)")
    return Lab(inventory=str(inventory), nodes={n.name: n for n in lab}, changes=changes)


def down() -> None:
    with locked():
        if stop_hub():
            log(f"stopped the lab hub ({HUB_URL})")
        if stop_git_server():
            log(f"stopped the lab git server ({GIT_URL})")
        if not engine_answers():
            log("no Docker engine answers: nothing to remove")
            return
        removed = []
        for kind, ls in (
            ("container", ["ps", "-aq"]),
            ("network", ["network", "ls", "-q"]),
            ("volume", ["volume", "ls", "-q"]),
        ):
            ids = docker(*ls, "--filter", f"label={LABEL}").stdout.split()
            if ids:
                rm = ["rm", "-f"] if kind == "container" else [kind, "rm"]
                docker(*rm, *ids)
                removed.append(f"{len(ids)} {kind}(s)")
        remove_cable_rules()
        if KNOWN_HOSTS.exists():
            KNOWN_HOSTS.unlink()  # host keys die with the containers
        for generated in STATE.glob("inventory-*"):
            shutil.rmtree(generated)  # so do the nodes they list
        if LAB_ID == 1 and STATE_SOURCE.exists():
            STATE_SOURCE.unlink()  # and the key and host keys it names
        log("removed " + (", ".join(removed) if removed else "nothing (no lab found)") + "; images kept as cache")
