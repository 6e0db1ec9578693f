"""A lab node's baseline, and the script that brings a node back to it.

The baseline is what `lab up` leaves on a node: no fault of tests/integration/lab_faults.py
in place. A fault is undone by its own context manager, but a run that is killed (a
timeout, ^C, CI's limit) never gets there; so every fault leaves a trace that this script
finds from the node's own state, not from the killed process's memory:

- vendor tools: no hang switch (/etc/glm53-lab/hang) and no hung call left running;
  no command moved to /var/lib/glm53-lab/hidden; gpu.json and links.json as shipped;
- mounts: no tmpfs of small_disk, no bind mount of kernel_kho over /proc (glm53-lab-gpud's
  node meminfo over /proc/meminfo stays: it is the node's, not a fault's);
- links: each cabled netdev up, MTU 9000, exactly its lab address (none moved to lo,
  no link-local address), named as links.json says;
- firewall: no DROP rule of block_port in INPUT;
- Docker: docker.io installed, engine active and not frozen, spark in group docker;
  daemon.json with the lab's own keys (bip, address pools, storage driver);
- users: no sudoers file of grant_sudo; spark's authorized_keys not left cut by
  break_worker_ssh.

`deploy=True` (the end-to-end tests, before and after each module) also removes what a
deployment leaves: daemon.json exactly as lab up writes it (no nvidia runtime), no
container in the node's engine, no cluster contract, no kit state (DISABLED, fails, lock).
`lab up` keeps those, so a second `make lab` still changes nothing.

Pure: builds the script; lab/spark_lab.py runs it (restore_baseline). Each fix it makes
prints one `restored: ...` line.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

GPU_STATE = "/etc/glm53-lab/gpu.json"
LINKS = "/etc/glm53-lab/links.json"
HANG = "/etc/glm53-lab/hang"
HIDDEN = "/var/lib/glm53-lab/hidden"
DAEMON_JSON = "/etc/docker/daemon.json"
AUTHORIZED_KEYS = "/home/spark/.ssh/authorized_keys"
AUTHORIZED_KEYS_SAVED = "/home/spark/.ssh/.authorized_keys.glm53-lab-fault"
SMALL_DISK_SOURCE = "glm53-lab-small-disk"
KHO_DIR = "/run/glm53-lab/kernel_kho"
# glm53-lab-gpud's node meminfo, bound over /proc/meminfo: its root in /proc/self/mountinfo
# (its path in the /run tmpfs). Not a fault's: the baseline keeps it.
GPUD_ROOT = "/glm53-lab/meminfo"
PROC_TARGETS = ("/proc/sys/kernel/osrelease", "/proc/version", "/proc/meminfo", "/proc/cmdline")
# Where the deploy leaves state on a node (roles' defaults: the contract, the kit's state).
DEPLOY_DIRS = ("/home/spark/.config/dgx_spark.glm53", "/home/spark/.local/state/glm53-tf-prod",
               "/home/spark/.local/state/glm53-tf", "/home/spark/.local/state/glm53-vllm",
               "/home/spark/.config/glm53-ops", "/home/spark/.local/lib/glm53-ops")
# The watchdog a deployment installs (role watchdog) and the kit's own units a test may add:
# gone before the engines, so no tick heals what the baseline removes.
USER_UNITS = "/home/spark/.config/systemd/user"
WATCHDOG_UNITS = ("glm53-watchdog.service", "glm53-watchdog.timer", "glm53-tf-watchdog.service",
                  "glm53-tf-watchdog.timer")
LAB_DAEMON_KEYS = ("bip", "default-address-pools", "storage-driver")


@dataclass(frozen=True)
class Link:
    netdev: str  # its Spark name (enp1s0f1np1, enP2p1s0f1np1)
    mac: str  # how the node's interface is found whatever it is named now
    cidr: str  # its only IPv4 address, e.g. 198.18.1.11/24


def _q(value) -> str:
    return shlex.quote(str(value))


def _file_step(path: str, content: str, then: str = "") -> str:
    """Put `content` at `path` when it differs (0644 root); run `then` after a change."""
    return (
        f"if ! printf %s {_q(content)} | cmp -s - {path}; then\n"
        f"  printf %s {_q(content)} > {path}.glm53-tmp && chmod 0644 {path}.glm53-tmp && mv -f {path}.glm53-tmp {path}\n"
        f"  echo 'restored: {path}'{'; ' + then if then else ''}\n"
        "fi\n"
    )


def _link_step(link: Link) -> str:
    mac, cidr, addr = _q(link.mac), _q(link.cidr), _q(link.cidr.split("/")[0])
    return (
        f"dev=$(ip -j link show | python3 -c 'import json,sys; print(next((i[\"ifname\"] for i in json.load(sys.stdin) "
        f"if i.get(\"address\") == sys.argv[1]), \"\"))' {mac})\n"
        f"if [ -z \"$dev\" ]; then echo 'cannot restore {link.netdev}: no interface with MAC {link.mac}' >&2; rc=1; else\n"
        f"  if ip -4 -o addr show dev lo | grep -qw {_q(link.cidr.split('/')[0] + '/32')}; then\n"
        f"    ip addr del {addr}/32 dev lo; echo 'restored: {link.cidr.split('/')[0]} off lo'; fi\n"
        f"  have=$(ip -4 -o addr show dev \"$dev\" | awk '{{print $4}}' | tr '\\n' ' ')\n"
        f"  if [ \"$have\" != {_q(link.cidr + ' ')} ]; then\n"
        f"    ip -4 addr flush dev \"$dev\" && ip addr add {cidr} broadcast + dev \"$dev\"\n"
        f"    echo \"restored: {link.netdev} address {link.cidr} (was: ${{have:-none}})\"; fi\n"
        f"  if [ \"$(cat /sys/class/net/$dev/mtu)\" != 9000 ]; then ip link set dev \"$dev\" mtu 9000; "
        f"echo 'restored: {link.netdev} mtu 9000'; fi\n"
        f"  if ! ip -o link show dev \"$dev\" | grep -q '[<,]UP[,>]'; then ip link set dev \"$dev\" up; "
        f"echo 'restored: {link.netdev} up'; fi\n"
        "fi\n"
    )


def script(*, links: list[Link], daemon_json: str, gpu_json: str, links_json: str, deploy: bool) -> str:
    """The bash script (run as root in the node) that brings it back to its baseline."""
    lab_keys = {k: v for k, v in json.loads(daemon_json).items() if k in LAB_DAEMON_KEYS}
    parts = [
        "set -u; rc=0\n",
        # Hung vendor tools: the switch, then the calls still wedged on it.
        f"if [ -e {HANG} ]; then rm -f {HANG} {HANG}.tmp; echo 'restored: no hang switch'; fi\n",
        "if pkill -f '^glm53-lab-hung:'; then echo 'restored: ended hung vendor tool calls'; fi\n",
        # Commands moved off PATH: back where their .path note says (hide_command writes it).
        f"for f in {HIDDEN}/*.path; do [ -e \"$f\" ] || continue; cmd=${{f%.path}}; to=$(cat \"$f\")\n"
        f"  if [ -e \"$cmd\" ]; then mv -f \"$cmd\" \"$to\"; fi; rm -f \"$f\"; echo \"restored: $to\"; done\n",
        # Mounts: kernel_kho's binds over /proc (the top one while it is not glm53-lab-gpud's
        # node meminfo, which belongs there), small_disk's tmpfs (deepest first).
        "for t in " + " ".join(PROC_TARGETS) + "; do\n"
        f"  while awk -v t=\"$t\" '$5 == t {{r=$4}} END {{exit !(r != \"\" && r != \"{GPUD_ROOT}\")}}' "
        "/proc/self/mountinfo; do umount \"$t\" || break; "
        "echo \"restored: unmounted $t\"; done; done\n",
        f"rm -rf {KHO_DIR}\n",
        f"awk '{{for (i = 7; i <= NF; i++) if ($i == \"-\") {{ if ($(i+2) == \"{SMALL_DISK_SOURCE}\") print $5; break }}}}' "
        "/proc/self/mountinfo | sort -r | while read -r m; do umount \"$m\" && echo \"restored: unmounted $m\"; done\n",
        # Simulated vendor state as shipped; a recabling is undone by renaming the netdevs.
        _file_step(GPU_STATE, gpu_json),
        _file_step(LINKS, links_json, then="recabled=1"),
    ]
    parts += [_link_step(link) for link in links]
    parts += [
        "out=$(/usr/local/sbin/glm53-lab-netnames) || rc=1; [ -z \"$out\" ] || echo \"restored: $out\"\n",
        # Firewall: the lab's nodes have no INPUT rule of their own, so any DROP is a fault's.
        "iptables -w -S INPUT | grep -- ' -j DROP' | sed 's/^-A /-D /' | while read -r r; do "
        "eval iptables -w \"$r\" && echo \"restored: removed iptables $r\"; done\n",
        # Users.
        "for f in /etc/sudoers.d/glm53-lab-*; do [ -e \"$f\" ] && rm -f \"$f\" && echo \"restored: removed $f\"; done\n",
        f"if [ -f {AUTHORIZED_KEYS_SAVED} ]; then mv -f {AUTHORIZED_KEYS_SAVED} {AUTHORIZED_KEYS}; "
        "echo 'restored: spark authorized_keys'; fi\n",
        "if ! id -nG spark | tr ' ' '\\n' | grep -qx docker; then usermod -aG docker spark; "
        "echo 'restored: spark in group docker'; fi\n",
        # Docker: installed, not frozen, running, with the lab's keys in daemon.json.
        "if [ \"$(dpkg-query -W -f='${Status}' docker.io 2>/dev/null)\" != 'install ok installed' ]; then\n"
        "  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io >/dev/null 2>&1 || "
        "{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
        "--no-install-recommends docker.io >/dev/null; } || rc=1\n"
        "  echo 'restored: docker.io installed'; restart=1; fi\n",
        "for p in $(pidof dockerd containerd); do if grep -q '^State:.*stopped' /proc/$p/status; then "
        "kill -CONT $p; echo \"restored: resumed frozen pid $p\"; fi; done\n",
    ]
    if deploy:
        parts.append(_file_step(DAEMON_JSON, daemon_json, then="restart=1"))
    else:
        keys = _q(json.dumps(lab_keys, sort_keys=True))
        parts.append(
            "if ! python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
            "k={k: d.get(k) for k in json.loads(sys.argv[2])}; sys.exit(k != json.loads(sys.argv[2]))' "
            f"{DAEMON_JSON} {keys} 2>/dev/null; then\n"
            + _file_step(DAEMON_JSON, daemon_json, then="restart=1")
            + "fi\n"
        )
    parts.append(
        "if [ -n \"${restart:-}\" ] || ! systemctl is-active -q docker.service; then\n"
        "  systemctl reset-failed docker.service docker.socket 2>/dev/null; systemctl enable -q --now docker.socket; "
        "systemctl restart docker.service\n"
        "  for i in $(seq 120); do docker info >/dev/null 2>&1 && break; sleep 0.5; done\n"
        "  docker info >/dev/null 2>&1 && echo 'restored: docker engine running' || "
        "{ echo 'docker did not answer after a restart' >&2; rc=1; }; fi\n"
    )
    if deploy:
        units = " ".join(f"{USER_UNITS}/{u} {USER_UNITS}/timers.target.wants/{u}" for u in WATCHDOG_UNITS)
        parts += [
            # Linger off ends spark's user manager (and its timers) once no session holds it.
            "if [ \"$(loginctl show-user spark -p Linger --value 2>/dev/null)\" = yes ]; then "
            "loginctl disable-linger spark; echo 'restored: linger off for spark'; fi\n",
            f"for f in {units}; do if [ -e \"$f\" ] || [ -L \"$f\" ]; then rm -f \"$f\"; "
            "echo \"restored: removed $f\"; fi; done\n",
            "if crontab -l -u spark >/dev/null 2>&1; then crontab -r -u spark; echo 'restored: no crontab for spark'; fi\n",
            "if pkill -f '[g]lm53-ops watch'; then echo 'restored: ended watchdog ticks'; fi\n",
        ]
        parts += [
            "ids=$(docker ps -aq); if [ -n \"$ids\" ]; then docker rm -f $ids >/dev/null; "
            "echo \"restored: removed $(echo $ids | wc -w) container(s)\"; fi\n",
        ]
        parts += [f"if [ -e {d} ]; then rm -rf {d}; echo 'restored: removed {d}'; fi\n" for d in DEPLOY_DIRS]
    parts.append("exit $rc\n")
    return "".join(parts)
