"""The command line: python lab/spark_lab.py up|down|reset|status|inventory [--nodes N]."""

from __future__ import annotations

import argparse
import sys

import sparklab
from sparklab.commands import LabError
from sparklab.health import status
from sparklab.inventory import inventory_path
from sparklab.layout import DEFAULT_NODES, MAX_NODES, NODES_ENV, REPO, node_count
from sparklab.lifecycle import down, reset, up


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=sparklab.__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("command", choices=["up", "down", "reset", "status", "inventory"])
    parser.add_argument(
        "--nodes", type=int, default=None,
        help=f"lab size: one head and N-1 workers, 1 to {MAX_NODES} (default ${NODES_ENV}, else {DEFAULT_NODES})",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            up(args.nodes)
        elif args.command == "down":
            down()
        elif args.command == "reset":
            reset(args.nodes)
        elif args.command == "inventory":
            print(inventory_path(node_count(args.nodes)).relative_to(REPO))
        else:
            return 0 if status(args.nodes) else 1
    except LabError as exc:
        print(f"[lab] ERROR: {exc}", file=sys.stderr)
        return 1
    return 0
