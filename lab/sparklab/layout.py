"""Where the lab lives and what it is made of: its paths, its nodes (names, addresses,
inner engine networks) and the node count. Pure: nothing here runs a command."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from sparklab.commands import LabError

LAB = Path(__file__).resolve().parents[1]  # lab/, this package's parent
REPO = LAB.parent

# Which lab: 1 (the default) lives in the controller's own network namespace and Docker
# engine. Lab 2, 3, ... are the same lab again - same node names, addresses, hub and git
# URLs, so tests run unchanged - each in a network namespace and Docker engine of its own
# (netns.py), so two test sessions can run side by side. `spark_lab.py --lab N` sets it.
LAB_ID_ENV = "GLM53_LAB_ID"
MAX_LABS = 4


def bounded(value, env: str, default: int, high: int, what: str, flag: str, note: str = "") -> int:
    """`value`, else $`env`, else `default`, as a whole number checked to be 1..`high`."""
    source = flag
    if value is None:
        value, source = os.environ.get(env) or default, env
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if not 1 <= number <= high:
        raise LabError(f"{source}: expected {what} from 1 to {high}{note}, found {value!r}")
    return number


def lab_id(value: int | str | None = None) -> int:
    """`value`, else $GLM53_LAB_ID, else 1; checked to be 1..MAX_LABS."""
    return bounded(value, LAB_ID_ENV, 1, MAX_LABS, "a lab number", "--lab")


def state_dir(number: int) -> Path:
    return LAB / (".state" if number == 1 else f".state-{number}")


def engine_host(number: int) -> str:
    """DOCKER_HOST of lab `number` > 1's own engine."""
    return f"unix:///run/glm53-lab-{number}/docker.sock"


LAB_ID = lab_id()
STATE = state_dir(LAB_ID)
# Lab N > 1: its engine's socket and roots (its network namespace: netns.py).
ENGINE_RUN = Path(f"/run/glm53-lab-{LAB_ID}")
ENGINE_DATA = Path(f"/var/lib/glm53-lab-{LAB_ID}")
ENGINE_HOST = engine_host(LAB_ID)
# Lab 1's engine, where lab N > 1 takes its images from instead of building them again.
FIRST_ENGINE_HOST = "unix:///var/run/docker.sock"
KEY = STATE / "id_ed25519"
KNOWN_HOSTS = STATE / "known_hosts"
INVENTORY = LAB / "inventory"
IMAGE_DIR = LAB / "image"
LABEL = "glm53-lab=1"


MAX_NODES = 16
DEFAULT_NODES = 2
NODES_ENV = "GLM53_LAB_NODES"

# Each node's memory: docker --memory, with the same --memory-swap (no swap, as a Spark runs).
# On a GB10 memory is unified and the engine's free memory is the kernel's MemFree, so page
# cache costs request slots. Each node has a memory of its own, which its simulated GPU driver
# (glm53-lab-gpud) reads from the node's memory cgroup: what runs on the node (its engines
# too: glm53-lab-docker-cgroup) and what it has cached is what it has used.
# 4 GiB: a busy node uses about 0.5 GiB - systemd, journald, sshd and sessions, dockerd and
# containerd, the simulators, Ansible's Python modules, git/rsync, a `docker build` of the kit
# image (pip in a throwaway container) or a `docker load` of the ~220 MB lab images, the engine
# rank's Python - and page cache fills the rest, as on a real machine. The simulated engine's
# slot rule is sized for it (lab/sim/tensorfold/README.md): 8 slots need about 3 GiB free at
# load, so about 1 GiB of stray page cache costs slots. A limit is a ceiling, not a reservation:
# two labs of four nodes use a few GiB of the controller's ~24 GiB besides their page cache,
# which the controller's kernel reclaims under its own pressure. A changed value recreates the
# nodes at the next `lab up` (nodes.py compares each node's limit with it).
NODE_MEMORY = 4 << 30


@dataclass
class Node:
    name: str
    index: int
    mgmt: str
    link1: str
    link2: str
    # The node's own Docker engine: distinct bridge and pool per node, inside 198.19.0.0/16.
    inner_bip: str
    inner_pool: str

    @property
    def volume(self) -> str:
        return f"glm53-lab-{self.name}-docker"

    @property
    def addresses(self) -> list[str]:
        return [self.mgmt, self.link1, self.link2]

    @property
    def is_head(self) -> bool:
        return self.index == 0


def node_name(index: int) -> str:
    """spark-head, spark-worker, spark-worker-2, spark-worker-3, ..."""
    return "spark-head" if index == 0 else "spark-worker" if index == 1 else f"spark-worker-{index}"


def node_index(name: str) -> int | None:
    """Index of a lab node name (inverse of node_name), None for anything else."""
    if name == "spark-head":
        return 0
    if name == "spark-worker":
        return 1
    m = re.fullmatch(r"spark-worker-([1-9][0-9]*)", name)
    return int(m.group(1)) if m and 2 <= int(m.group(1)) < MAX_NODES else None


def inner_network(index: int) -> tuple[str, str]:
    """(bip, address pool) of a node's inner engine. Head and worker keep the /18 pools
    they always had; later nodes get a /21 (8 networks of /24) from what is left, so no
    two engines overlap: bips in 198.19.0.0/20, pools 198.19.16.0-63.255 and 64.0-255.255."""
    bip = f"198.19.{index}.1/24"
    if index == 0:
        return bip, "198.19.64.0/18"
    if index == 1:
        return bip, "198.19.128.0/18"
    k = index - 2
    third = 192 + 8 * k if k < 8 else 16 + 8 * (k - 8)
    return bip, f"198.19.{third}.0/21"


def make_node(index: int) -> Node:
    host = 10 + index
    bip, pool = inner_network(index)
    return Node(node_name(index), index, f"198.18.0.{host}", f"198.18.1.{host}", f"198.18.2.{host}", bip, pool)


def lab_nodes(count: int) -> list[Node]:
    """The nodes of a lab of `count` nodes, head first."""
    return [make_node(i) for i in range(count)]


def node_count(nodes: int | str | None = None) -> int:
    """`nodes`, else $GLM53_LAB_NODES, else 2; checked to be 1..16."""
    return bounded(nodes, NODES_ENV, DEFAULT_NODES, MAX_NODES, "a node count", "--nodes", " (one head, the rest workers)")


NODES = lab_nodes(DEFAULT_NODES)  # the default two-node lab
HEAD, WORKER = NODES
LINK_NETDEVS = {"glm53-lab-link1": "enp1s0f1np1", "glm53-lab-link2": "enP2p1s0f1np1"}
