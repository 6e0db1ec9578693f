# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""cx7_link: what must reach what between the nodes (controller side): head -> worker
BatchMode ssh with docker there, and worker -> head TCP on the NCCL master port.
Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_parsers import command_error, timed_out
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._preflight_result import (
    FAIL,
    passed_or,
    result,
    skipped,
)

SSH_FAILED_RC = 255
# Printed by the probe's ssh command before `docker ps`, so a wedged docker is told apart
# from a wedged login.
SSH_MARKER = "glm53-ssh-ok"


def check_ssh(config, obs_by_node):
    """Per worker: the head logs in with BatchMode over the worker's link address, and
    `docker ps` works there as the same user (the kit drives rank 1 that way)."""
    out = []
    head = config["head"]
    done = dict((item.get("worker"), item) for item in (obs_by_node.get(head) or {}).get("ssh") or [])
    for worker in config["workers"]:
        reg = done.get(worker)
        if not reg:
            out.append(skipped("ssh.head_to_worker", head, FAIL, ["link.ipv4", "link.port_up", "node.reachable", "node.link_facts"],
                               summary="ssh to %s: needs the worker's link address" % worker))
            out.append(skipped("ssh.worker_docker", worker, FAIL, "ssh.head_to_worker"))
            continue
        target = reg.get("target") or worker
        reason = command_error(reg)
        if timed_out(reg):
            # Logged in (the marker came back) but docker did not answer, or the login itself hung.
            ssh_ok, docker_ok = SSH_MARKER in (reg.get("stdout") or ""), False
            fix = ("find out why `ssh %s docker ps -q` hangs: an sshd or a Docker engine that does not answer on %s "
                   "(`systemctl status docker` there)" % (target, worker))
        else:
            ssh_ok = reg.get("rc") != SSH_FAILED_RC
            docker_ok = reg.get("rc") == 0
            if "host key verification failed" in reason.lower():
                fix = ("on %s as the deploy user run `ssh %s true` once and accept the host key (or add it with "
                       "ssh-keyscan)" % (head, target))
            else:
                fix = ("on %s as the deploy user run `ssh-copy-id %s` (BatchMode needs key auth, no password prompt) "
                       "and check the worker's sshd listens on its link address" % (head, target))
        out.append(result(
            "ssh.head_to_worker", head, passed_or(FAIL, ssh_ok), FAIL,
            expected="`ssh -o BatchMode=yes %s` logs in without a prompt" % target,
            found="logged in" if ssh_ok else reason, fix=fix,
            summary="BatchMode ssh to %s %s" % (target, "works" if ssh_ok else "failed")))
        if not ssh_ok:
            out.append(skipped("ssh.worker_docker", worker, FAIL, "ssh.head_to_worker"))
            continue
        out.append(result(
            "ssh.worker_docker", worker, passed_or(FAIL, docker_ok), FAIL,
            expected="`docker ps` works for the ssh user on %s" % worker, found="works" if docker_ok else reason,
            fix="add the user to the docker group on %s (`sudo usermod -aG docker <user>`, then log in again) and "
                "make sure dockerd runs and answers (`systemctl status docker`)" % worker,
            summary="docker over ssh %s" % ("works" if docker_ok else "failed")))
    return out


def check_master_port(config, obs_by_node):
    """Each worker connects to the NCCL master port on the head's link address while the
    head listens; an engine already holding the port (serving mode) counts when it accepts."""
    out = []
    head = config["head"]
    port = config["master_port"]
    listen = (obs_by_node.get(head) or {}).get("listen")
    for node in config["workers"]:
        connect = (obs_by_node.get(node) or {}).get("connect")
        if not listen or not connect:
            out.append(skipped("port.master", node, FAIL, ["link.address", "link.ipv4", "link.port_up", "node.reachable", "node.link_facts"],
                               summary="port %s: needs the link address on %s and both nodes reachable" % (port, head)))
            continue
        target = "%s:%s" % (connect.get("address"), port)
        ok = bool(connect.get("connected"))
        if ok and not listen.get("bound"):
            found = "connected; the port is already held on %s (%s), e.g. by the running engine" % (head, listen.get("error"))
        elif ok:
            found = "connected"
        elif not listen.get("bound"):
            found = "%s could not listen: %s" % (head, listen.get("error"))
        else:
            found = connect.get("error") or "no connection"
        out.append(result(
            "port.master", node, passed_or(FAIL, ok), FAIL,
            expected="TCP connect %s -> %s (NCCL master port for path %s)" % (node, target, config.get("path")),
            found=found,
            fix="allow TCP %s from %s on %s (e.g. `sudo ufw allow from <worker link address> to any port %s proto tcp`) "
                "and make sure nothing else holds the port" % (port, node, head, port),
            summary="master port %s %s from %s" % (port, "reachable" if ok else "not reachable", node)))
    return out
