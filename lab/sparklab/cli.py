"""The command line: python lab/spark_lab.py [--lab N] up|down|reset|status|inventory [--nodes N],
and `python lab/spark_lab.py --lab N run -- COMMAND...` (COMMAND in lab N's namespace, with its
DOCKER_HOST and GLM53_LAB_ID: how a second test session talks to lab 2)."""

from __future__ import annotations

import argparse
import os
import sys

import sparklab
from sparklab import netns
from sparklab.commands import LabError
from sparklab.health import status
from sparklab.inventory import inventory_path
from sparklab.layout import DEFAULT_NODES, LAB, LAB_ID, LAB_ID_ENV, MAX_LABS, MAX_NODES, NODES_ENV, REPO, lab_id, node_count
from sparklab.lifecycle import down, reset, up


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=sparklab.__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("command", choices=["up", "down", "reset", "status", "inventory", "run"])
    parser.add_argument(
        "--nodes", type=int, default=None,
        help=f"lab size: one head and N-1 workers, 1 to {MAX_NODES} (default ${NODES_ENV}, else {DEFAULT_NODES})",
    )  # fmt: skip
    parser.add_argument(
        "--lab", default=None,
        help=f"which lab, 1 to {MAX_LABS} (default ${LAB_ID_ENV}, else 1); 2 and up each run in a network "
             "namespace and Docker engine of their own, with the same names and addresses as lab 1",
    )  # fmt: skip
    parser.add_argument("argv", nargs=argparse.REMAINDER, help="run: the command (after --) to run in the lab")
    args = parser.parse_args(argv)
    try:
        wanted = lab_id(args.lab)
        if wanted != LAB_ID or (wanted > 1 and not netns.inside(wanted)):
            # Start again inside that lab: this process's lab was fixed when it was imported.
            rest = [a for i, a in enumerate(argv) if a != "--lab" and not a.startswith("--lab=")
                    and not (i > 0 and argv[i - 1] == "--lab")]
            netns.enter(wanted, [sys.executable, str(LAB / "spark_lab.py"), *rest])
        if args.command == "run":
            command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
            if not command:
                raise LabError("run: give the command after --, e.g. spark_lab.py --lab 2 run -- pytest ...")
            os.execvp(command[0], command)
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
