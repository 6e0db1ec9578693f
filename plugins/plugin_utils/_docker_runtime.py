# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The docker_runtime role's judgment, on the controller. Not a public API.

``plan()`` reads what docker_runtime_info found on a node and decides what is missing,
what the role will fix (every fix needs root), whether it may (become), and what must
stop the play. ``repositories()``, ``packages()`` and ``deb822()`` are the apt data for
the install steps: Docker's and NVIDIA's repositories as deb822 sources with
``Signed-By``, the pinned package versions, the Debian architecture name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# `uname -m` (Ansible's architecture fact) -> Debian architecture.
DEB_ARCH = {"aarch64": "arm64", "arm64": "arm64", "x86_64": "amd64", "amd64": "amd64"}
DOCKER_DISTROS = ("ubuntu", "debian")
ENGINE_SOURCES = ("docker", "distribution")
DOCKER_EPOCH = "5"
TOOLKIT_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
                    "libnvidia-container1")
# Fixes in the order the role applies them: packages, service, config, restart, group.
STEP_ORDER = ("install_engine", "install_toolkit", "start_engine", "configure_runtime", "restart_engine", "join_group")
ACTIONS = {
    "install_engine": "install Docker",
    "install_toolkit": "install the NVIDIA Container Toolkit",
    "start_engine": "start and enable docker.service",
    "configure_runtime": "register the runtime with nvidia-ctk and restart Docker",
    "restart_engine": "restart Docker",
    "join_group": "add %(user)s to the docker group and reconnect",
}
# plan()'s ``status``: only ``ready`` says a --gpus all container ran; ``gpu_not_proven`` stops
# nothing (a stock node before any engine image exists must still deploy) but is never ready.
STATUSES = ("ready", "gpu_not_proven", "changes_due", "pending", "failed")
BECOME_HINT = "rerun with become (-b, as a user with sudo; for example -e ansible_user=admin -b)"

DEFAULTS = {
    "user": "",
    "engine_source": "docker",
    "docker_repo_url": "https://download.docker.com/linux",
    "docker_key_fingerprint": "9DC858229FC7DD38854AE2D88D81803C0EBFCD88",
    "docker_version": "28.5.2",
    "containerd_version": "1.7.28",
    "distribution_docker_version": "",
    "toolkit_install": True,
    "toolkit_repo_url": "https://nvidia.github.io/libnvidia-container/stable/deb",
    "toolkit_key_url": "https://nvidia.github.io/libnvidia-container/gpgkey",
    "toolkit_key_fingerprint": "C95B321B61E88C1809C4F759DDCAE044F796ECB0",
    "toolkit_version": "1.18.1-1",
    "keyring_dir": "/etc/apt/keyrings",
    "sources_dir": "/etc/apt/sources.list.d",
    "set_as_default": False,
    "daemon_json": "/etc/docker/daemon.json",
    "test_image": "",
    "timeout": 30,
    "runtime": "nvidia",
}


def settings_with_defaults(settings):
    out = dict(DEFAULTS)
    out.update(dict((k, v) for k, v in (settings or {}).items() if v is not None))
    return out


def deb_architecture(machine):
    """Debian's name for ``uname -m`` (``aarch64`` -> ``arm64``), or None when unknown."""
    return DEB_ARCH.get(str(machine or "").strip().lower())


def apt_version(version, distro, distro_version, codename, epoch=""):
    """The apt version of a Docker repository package: ``28.5.2`` on Ubuntu 24.04 is
    ``5:28.5.2-1~ubuntu.24.04~noble`` (``epoch`` 5 for docker-ce). A value that already
    carries a Debian revision or an epoch (``-``, ``:``, ``~``) is taken as given; empty
    means unpinned."""
    version = str(version or "").strip()
    if not version or any(c in version for c in ":~-"):
        return version
    return "%s%s-1~%s.%s~%s" % (epoch + ":" if epoch else "", version, distro, distro_version, codename)


def pinned(name, version):
    return "%s=%s" % (name, version) if version else name


def deb822(fields, comment=None):
    """A deb822 source stanza; fields whose value is empty are left out (a flat repository
    has no Components)."""
    lines = ["# %s" % line for line in (comment or [])]
    for key, value in fields:
        if isinstance(value, (list, tuple)):
            value = " ".join(str(v) for v in value)
        if value not in (None, ""):
            lines.append("%s: %s" % (key, value))
    return "\n".join(lines) + "\n"


def _platform(platform):
    platform = platform or {}
    return {
        "distro": str(platform.get("distribution") or "").lower(),
        "codename": str(platform.get("distribution_release") or "").lower(),
        "version": str(platform.get("distribution_version") or ""),
        "arch": deb_architecture(platform.get("architecture")),
        "machine": platform.get("architecture"),
        "os_family": platform.get("os_family"),
    }


def platform_problems(settings, platform, engine, toolkit):
    """Why the install steps cannot run on this platform (empty when they can)."""
    s, p = settings_with_defaults(settings), _platform(platform)
    out = []
    if not (engine or toolkit):
        return out
    if p["os_family"] != "Debian":
        out.append("installing needs an apt-based node (Ubuntu or Debian), found %s"
                   % (platform or {}).get("distribution", "an unknown system"))
        return out
    if not p["arch"]:
        out.append("no Debian architecture known for %r (expected aarch64 or x86_64)" % p["machine"])
    if engine and s["engine_source"] == "docker":
        if p["distro"] not in DOCKER_DISTROS:
            out.append("Docker's repository has packages for Ubuntu and Debian, found %s; set "
                       "docker_runtime_engine_source: distribution to use the distribution's docker.io"
                       % (platform or {}).get("distribution"))
        elif not (p["codename"] and p["version"]):
            out.append("the distribution release (codename and version) is unknown")
    return out


def repositories(settings, platform, engine, toolkit):
    """The apt repositories the install steps add: ``[{name, key_url, key_path, fingerprint,
    source_path, source}]`` with each source rendered as deb822 with ``Signed-By``."""
    s, p = settings_with_defaults(settings), _platform(platform)
    out = []
    note = "Managed by dgx_spark.glm53.docker_runtime; key pinned by fingerprint %s."
    if engine and s["engine_source"] == "docker":
        key_path = "%s/docker.asc" % s["keyring_dir"]
        base = "%s/%s" % (s["docker_repo_url"].rstrip("/"), p["distro"])
        out.append({
            "name": "docker",
            "key_url": base + "/gpg",
            "key_path": key_path,
            "fingerprint": s["docker_key_fingerprint"],
            "source_path": "%s/docker.sources" % s["sources_dir"],
            "source": deb822([("Types", "deb"), ("URIs", base), ("Suites", p["codename"]), ("Components", "stable"),
                              ("Architectures", p["arch"]), ("Signed-By", key_path)],
                             comment=[note % s["docker_key_fingerprint"]]),
        })
    if toolkit:
        key_path = "%s/nvidia-container-toolkit.asc" % s["keyring_dir"]
        out.append({
            "name": "nvidia-container-toolkit",
            "key_url": s["toolkit_key_url"],
            "key_path": key_path,
            "fingerprint": s["toolkit_key_fingerprint"],
            "source_path": "%s/nvidia-container-toolkit.sources" % s["sources_dir"],
            # A flat repository per architecture: the suite is "/" and there are no components.
            "source": deb822([("Types", "deb"), ("URIs", "%s/%s" % (s["toolkit_repo_url"].rstrip("/"), p["arch"])),
                              ("Suites", "/"), ("Architectures", p["arch"]), ("Signed-By", key_path)],
                             comment=[note % s["toolkit_key_fingerprint"]]),
        })
    return out


def packages(settings, platform, engine, toolkit):
    """``{engine: [...], toolkit: [...]}``: apt package specs, pinned (``name=version``)."""
    s, p = settings_with_defaults(settings), _platform(platform)
    out = {"engine": [], "toolkit": []}
    if engine:
        if s["engine_source"] == "docker":
            ce = apt_version(s["docker_version"], p["distro"], p["version"], p["codename"], DOCKER_EPOCH)
            containerd = apt_version(s["containerd_version"], p["distro"], p["version"], p["codename"])
            out["engine"] = [pinned("docker-ce", ce), pinned("docker-ce-cli", ce), pinned("containerd.io", containerd)]
        else:
            out["engine"] = [pinned("docker.io", s["distribution_docker_version"])]
    if toolkit:
        out["toolkit"] = [pinned(name, s["toolkit_version"]) for name in TOOLKIT_PACKAGES]
    return out


class _Plan(object):
    """Collects what is missing (fixable with root) and what only the operator can fix."""

    def __init__(self, node):
        self.node = node
        self.steps = []
        self.problems = []
        self.notes = []

    def step(self, step, check, missing, fix, found):
        self.steps.append({"step": step, "check": check, "missing": missing, "fix": fix, "found": found})

    def problem(self, check, text):
        self.problems.append("[docker_runtime.%s] %s: %s" % (check, self.node, text))

    def has(self, *names):
        return any(s["step"] in names for s in self.steps)


def _list(values):
    return ", ".join(values) if values else "none"


def _engine(p, probe, s):
    """Engine installed, service running and enabled; False when the rest cannot be judged."""
    docker = probe.get("docker") or {}
    service = docker.get("service") or {}
    if not docker.get("path") or (service and service.get("LoadState") == "not-found"):
        found = "no docker command on PATH" if not docker.get("path") else "a docker command but no docker.service"
        source = ("Docker CE from Docker's repository" if s["engine_source"] == "docker"
                  else "the distribution's docker.io")
        p.step("install_engine", "engine", "docker is missing", "install it (%s)" % source, found)
        return False
    if not service:
        if not (probe.get("daemon") or {}).get("answered"):
            p.problem("service", "docker.service cannot be read (%s) and the engine does not answer; expected a "
                                 "running docker.service; fix: start the Docker engine and rerun" % docker.get("service_error"))
        return True
    if service.get("UnitFileState") == "masked":
        p.problem("service", "docker.service is masked; expected it enabled and running; fix: sudo systemctl unmask "
                             "docker.service and rerun")
        return True
    inactive = service.get("ActiveState") != "active"
    disabled = service.get("UnitFileState") == "disabled"
    if inactive or disabled:
        what = "the docker service is not running" if inactive else "the docker service is not enabled at boot"
        p.step("start_engine", "service", what, "start it (sudo systemctl enable --now docker)",
               "docker.service %s, %s" % (service.get("ActiveState"), service.get("UnitFileState")))
    return True


def _daemon(p, probe, s, as_deploy):
    """The answer of `docker info` as the deploy user; True when it answered."""
    daemon = probe.get("daemon") or {}
    user = probe.get("user") or {}
    if not daemon.get("ran") or daemon.get("answered"):
        return bool(daemon.get("answered"))
    if daemon.get("timed_out"):
        p.problem("engine", "`%s` did not finish within %ss (docker_runtime_command_timeout): the Docker engine is "
                            "wedged; expected an answer; fix: look at `systemctl status docker` and "
                            "`journalctl -u docker`, restart the engine when nothing important runs, and rerun"
                  % (daemon.get("command"), daemon.get("timeout")))
        return False
    kind = daemon.get("error_kind")
    if kind == "unreachable":
        if not p.has("start_engine", "install_engine"):
            p.problem("engine", "docker.service is active but `docker info` cannot reach the daemon (%s); fix: look at "
                                "`journalctl -u docker` and rerun" % daemon.get("error"))
    elif kind == "permission":
        if not as_deploy:
            return False
        if not user.get("in_docker_group"):
            return False  # the group step covers it
        if not user.get("session_in_docker_group"):
            p.notes.append("%s joined the docker group after this login session started; reconnecting" % user.get("name"))
            return False
        p.problem("access", "%s is in the docker group but `docker info` says: %s; expected access to "
                            "/var/run/docker.sock through the group; fix: check the socket's owner and mode "
                            "(root:docker 0660) and rerun" % (user.get("name"), daemon.get("error")))
    else:
        p.problem("engine", "`docker info` failed: %s; fix: look at `journalctl -u docker` and rerun" % daemon.get("error"))
    return False


def _runtime(p, probe, s, answered, as_deploy):
    dj = probe.get("daemon_json") or {}
    daemon = probe.get("daemon") or {}
    runtime = s["runtime"]
    if dj.get("error"):
        p.problem("daemon_json", "%s is %s; expected a JSON object Docker and nvidia-ctk can read; fix: repair it by "
                                 "hand (python3 -m json.tool %s shows where) and rerun; nothing was changed"
                  % (dj.get("path"), dj.get("error"), dj.get("path")))
        return
    status = dj.get("runtime") or {}
    loaded = "runtimes in `docker info`: %s" % _list(daemon.get("runtimes")) if answered else "dockerd not asked"
    if not status.get("configured"):
        what = ("the %s runtime is missing" % runtime if not status.get("registered")
                else "%s as Docker's default runtime is missing" % runtime)
        p.step("configure_runtime", "runtime", what,
               "configure it (sudo nvidia-ctk runtime configure --runtime=docker%s, then sudo systemctl restart docker)"
               % (" --set-as-default" if s["set_as_default"] else ""),
               "%s; %s lacks %s" % (loaded, dj.get("path"), " and ".join(status.get("missing") or [])))
        return
    if answered and as_deploy:
        stale = runtime not in (daemon.get("runtimes") or []) or (
            s["set_as_default"] and daemon.get("default_runtime") != runtime)
        if stale:
            p.step("restart_engine", "runtime_loaded", "the %s runtime in %s is not loaded by the running dockerd"
                   % (runtime, dj.get("path")), "restart Docker (sudo systemctl restart docker)",
                   "%s, default %s" % (loaded, daemon.get("default_runtime")))


def _group(p, probe):
    user = probe.get("user") or {}
    name = user.get("deploy_user")
    if not user.get("exists"):
        p.problem("user", "the deploy user %s does not exist on this node; expected the user that runs the engines; "
                          "fix: set docker_runtime_user (or ansible_user) to it and rerun" % name)
    elif not user.get("in_docker_group"):
        p.step("join_group", "group", "the docker group membership of %s is missing" % name,
               "add it (sudo usermod -aG docker %s, then log in again)" % name,
               "%s is in: %s" % (name, _list(user.get("groups"))))


def _container(p, probe, s, answered, as_deploy):
    """GPU access as the test container showed it: ``proven`` (a ``--gpus all`` container ran),
    ``not_proven`` (no image to run: docker_runtime_test_image is empty and none of the
    collection's images is on the node), ``failed`` (a problem is recorded) or ``pending``
    (not judged yet: fixes are due, or the probe did not run as the deploy user)."""
    run = probe.get("test_run") or {}
    if not (answered and as_deploy):
        return "pending"
    pending = p.has("install_engine", "install_toolkit", "configure_runtime", "restart_engine")
    if run.get("timed_out"):
        p.problem("container", "`%s` did not finish within %ss (docker_runtime_command_timeout); expected the test "
                               "container to exit at once; fix: look at `journalctl -u docker`, then rerun"
                  % (run.get("command"), s["timeout"]))
        return "failed"
    if not run.get("present"):
        if not s["test_image"]:
            return "not_proven"
        p.problem("image", "image %s is not on this node (the role never pulls it); expected a small local image for "
                           "`docker run --rm --gpus all`; fix: docker pull %s (or docker load it), or set "
                           "docker_runtime_test_image to an image the node has" % (s["test_image"], s["test_image"]))
        return "failed"
    if run.get("ok"):
        return "proven"
    if pending:
        return "pending"
    p.problem("container", "`%s` failed (rc %s): %s; expected it to run with the GPU; fix: check the NVIDIA "
                           "driver (nvidia-smi) and the toolkit (nvidia-ctk --version), then rerun"
              % (run.get("command"), run.get("rc"), run.get("stderr") or run.get("error")))
    return "failed"


def not_proven_line(node, user, runtime, tried):
    """What the role says, once per node, when Docker is set up but no container proved GPU access."""
    found = ("none of %s is on the node" % ", ".join(tried) if tried
             else "no image the collection uses is known (docker_runtime_known_images is empty)")
    return ("%s: GPU access not proven for %s: Docker and the %s runtime are set up (`docker info` lists it), but no "
            "`docker run --gpus all` container ran, because docker_runtime_test_image is empty and %s; expected a "
            "container to start with the GPU; fix: set docker_runtime_test_image to an image present on the node "
            "(it is never pulled) and rerun" % (node, user, runtime, found))


def plan(probe, settings, node, become=False, check_mode=False, final=False, platform=None):
    """What to do on ``node`` from its docker_runtime_info ``probe``.

    ``become``: whether the play lets tasks become root. Returns a dict with ``status``
    (see STATUSES), ``gpu_image`` (the image whose ``--gpus all`` container ran, or None), one boolean
    per step (``install_engine``, ``install_toolkit``, ``start_engine``, ``configure_runtime``,
    ``restart_engine``, ``join_group``), ``reconnect``, ``probe_as_user`` (the probe ran as
    another user: ask again as the deploy user), ``verify``, ``repositories``,
    ``packages``, ``steps``, ``notes``, ``summary`` and ``failures`` (messages that must
    stop the play on this node; empty when it may go on). With ``final`` (after the
    fixes) anything still missing is a failure.
    """
    s = settings_with_defaults(settings)
    p = _Plan(node)
    user = probe.get("user") or {}
    deploy = user.get("deploy_user") or user.get("name")
    as_deploy = user.get("name") == deploy
    root = user.get("uid") == 0
    out = {"node": node, "user": deploy, "connected_as": user.get("name"), "become": bool(become), "root": root,
           "probe_as_user": False, "reconnect": False, "verify": False, "verify_become": not as_deploy}

    if not as_deploy and not final:
        out["probe_as_user"] = True
        if not (become or root):
            p.problem("access", "connected as %s but the deploy user is %s and become is off; expected to check Docker "
                                "as %s; fix: connect as %s (ansible_user) or %s"
                      % (user.get("name"), deploy, deploy, deploy, BECOME_HINT))
            out.update(failures=p.problems, steps=[], notes=[], summary=p.problems, changed=False,
                       repositories=[], packages={"engine": [], "toolkit": []}, status="failed", gpu_image=None)
            out.update(dict((name, False) for name in STEP_ORDER))
            return out

    engine_known = _engine(p, probe, s)
    toolkit_missing = not (probe.get("nvidia_ctk") or {}).get("path")
    if toolkit_missing:
        if s["toolkit_install"]:
            p.step("install_toolkit", "toolkit", "the NVIDIA Container Toolkit (nvidia-ctk) is missing",
                   "install it (package nvidia-container-toolkit from NVIDIA's repository)", "no nvidia-ctk on PATH")
        else:
            p.problem("toolkit", "nvidia-ctk is missing and docker_runtime_toolkit_install is false; expected the "
                                 "NVIDIA Container Toolkit; fix: install it, or set docker_runtime_toolkit_install: "
                                 "true and rerun")
    answered = _daemon(p, probe, s, as_deploy) if engine_known else False
    if as_deploy and not answered and (probe.get("daemon") or {}).get("error_kind") == "permission" \
            and user.get("in_docker_group") and not user.get("session_in_docker_group"):
        out["reconnect"] = True
    _runtime(p, probe, s, answered, as_deploy or root)
    _group(p, probe)
    gpu = _container(p, probe, s, answered, as_deploy)

    install_engine, install_toolkit = p.has("install_engine"), p.has("install_toolkit")
    if install_engine or install_toolkit:
        for problem in platform_problems(s, platform, install_engine, install_toolkit):
            p.problem("platform", problem)
    steps = sorted(p.steps, key=lambda st: STEP_ORDER.index(st["step"]))
    out.update(dict((name, p.has(name)) for name in STEP_ORDER))
    out["steps"] = steps
    out["notes"] = p.notes
    out["repositories"] = repositories(s, platform, install_engine, install_toolkit) if not p.problems else []
    out["packages"] = packages(s, platform, install_engine, install_toolkit)

    failures = list(p.problems)
    if final:
        failures += ["[docker_runtime.%s] %s: after the role's changes %s; found %s; fix: %s and rerun"
                     % (st["check"], node, st["missing"], st["found"], st["fix"]) for st in steps]
        if out["reconnect"]:
            failures.append("[docker_runtime.session] %s: %s still cannot use Docker after reconnecting; fix: log in "
                            "again and rerun" % (node, deploy))
    elif steps and not (become or root):
        lines = ["[docker_runtime.%s] %s on %s and become is off: %s or %s. Found: %s."
                 % (st["check"], st["missing"], node, st["fix"], BECOME_HINT, st["found"]) for st in steps]
        if check_mode:
            p.notes.extend(lines)
        else:
            failures += [line + " Nothing was changed." for line in lines]
    out["failures"] = failures
    out["verify"] = not final and not check_mode and bool(steps or out["reconnect"])
    out["changed"] = bool(check_mode and steps and not failures)
    run = probe.get("test_run") or {}
    out["gpu_image"] = run.get("image") if gpu == "proven" else None
    if failures:
        out["status"] = "failed"
        out["summary"] = list(failures)
    elif steps:
        out["status"] = "changes_due"
        actions = ", ".join(ACTIONS[st["step"]] % {"user": deploy} for st in steps)
        out["summary"] = ["%s: %s; %s: %s" % (node, "; ".join(st["missing"] for st in steps),
                                              "a real run would" if check_mode else "fixing with become", actions)]
    elif gpu == "proven" and run.get("source") == "running_engine":
        engine = run.get("engine") or {}
        out["status"] = "ready"
        out["summary"] = ["%s: Docker and the %s runtime are ready for %s: the %s engine container %s (%s) has run "
                          "with the GPU since %s, after docker.service started, so no test container was run"
                          % (node, s["runtime"], deploy, engine.get("path"), engine.get("name"), out["gpu_image"],
                             engine.get("started"))]
    elif gpu == "proven":
        out["status"] = "ready"
        out["summary"] = ["%s: Docker and the %s runtime are ready for %s: a `docker run --gpus all` container of %s "
                          "ran" % (node, s["runtime"], deploy, out["gpu_image"])]
    elif gpu == "not_proven":
        out["status"] = "gpu_not_proven"
        out["summary"] = [not_proven_line(node, deploy, s["runtime"], run.get("tried") or [])]
    else:
        # Nothing to fix, but the deploy user's probe (or the one after reconnecting) is still to come.
        out["status"] = "pending"
        out["summary"] = ["%s: Docker and the %s runtime are to be checked again as %s" % (node, s["runtime"], deploy)]
    out["summary"] += p.notes
    return out
