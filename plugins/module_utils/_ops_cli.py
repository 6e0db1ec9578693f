# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers: the command line of the operations program ``glm53-ops``. Not a public API.

    glm53-ops start|restart [--by WHO] [--lock-wait S]   stop, evict, start, wait (start.yml, a heal)
    glm53-ops stop [--by WHO] [--lock-wait S]            DISABLED, then every rank, the head first
    glm53-ops status [--json]                            ranks, /health, slots, memory, disk, links, watchdog
    glm53-ops watch --once | --for SECONDS               one watchdog tick, or ticks for cron's minute
    glm53-ops node-facts|evict JSON                      a node's part, asked by the head over ssh

start, restart and stop print one JSON line and exit 0 (done), 1 (failed) or 75 (the lock is held).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import sys

from ansible_collections.dgx_spark.glm53.plugins.module_utils._ops import Cluster, start, stop
from ansible_collections.dgx_spark.glm53.plugins.module_utils._ops_nodes import evict_here, node_facts
from ansible_collections.dgx_spark.glm53.plugins.module_utils._ops_state import State
from ansible_collections.dgx_spark.glm53.plugins.module_utils._ops_status import collect, table
from ansible_collections.dgx_spark.glm53.plugins.module_utils._watchdog import tick, watch_for

CONFIG_DIR = "~/.config/glm53-ops"
EX_BUSY = 75


def _load(path, what):
    path = os.path.expanduser(path)
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError) as exc:
        raise SystemExit("glm53-ops: cannot read %s %s: %s (a deploy with playbooks/site.yml writes it)" % (
            what, path, exc))


def _out(text):
    """One answer on stdout (a worker's answer is read from its last line)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _state(config):
    return State(config["state_dir"], log_name=config.get("log_name") or "watchdog.log")


def _parser():
    parser = argparse.ArgumentParser(prog="glm53-ops", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--config-dir", default=os.environ.get("GLM53_OPS_CONFIG_DIR", CONFIG_DIR))
    sub = parser.add_subparsers(dest="action", required=True)
    for name in ("start", "restart", "stop"):
        one = sub.add_parser(name)
        one.add_argument("--by", default="glm53-ops %s" % name)
        one.add_argument("--lock-wait", type=float, default=0.0 if name != "stop" else 120.0)
    status = sub.add_parser("status")
    status.add_argument("--json", action="store_true")
    watch = sub.add_parser("watch")
    group = watch.add_mutually_exclusive_group(required=True)
    group.add_argument("--once", action="store_true")
    group.add_argument("--for", dest="seconds", type=float)
    for name in ("node-facts", "evict"):
        sub.add_parser(name).add_argument("query")
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.action in ("node-facts", "evict"):
        function = node_facts if args.action == "node-facts" else evict_here
        _out(json.dumps(function(json.loads(args.query)), sort_keys=True))
        return 0
    config = _load(os.path.join(args.config_dir, "ops.json"), "the operations plan")
    state = _state(config)
    if args.action in ("start", "restart", "stop"):
        run = stop if args.action == "stop" else start
        result = run(config, state, by=args.by, lock_wait=args.lock_wait)
        result["state_log"] = state.path(state.log_name)
        _out(json.dumps(result, sort_keys=True))
        return 0 if result["ok"] else (EX_BUSY if result["busy"] else 1)
    if args.action == "status":
        cluster = Cluster(config)
        try:
            found = collect(cluster, state)
        finally:
            cluster.close()
        lines = table(found)
        _out(json.dumps(dict(found, table=lines), sort_keys=True, default=str) if args.json else "\n".join(lines))
        return 0
    settings_path = os.path.join(os.path.expanduser(args.config_dir), "watchdog.json")
    settings = _load(settings_path, "the watchdog settings") if os.path.exists(settings_path) else {}
    if args.once:
        outcome = tick(config, settings, state)
        _out(json.dumps(outcome, sort_keys=True))
        return 0
    interval = float(settings.get("interval") or 15)
    outcomes = watch_for(config, settings, state, args.seconds, interval, state.path("watch.lock"))
    _out(json.dumps(outcomes, sort_keys=True))
    return 0
