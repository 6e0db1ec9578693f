"""The lab node's simulated NVIDIA container runtime and hook (lab/image/node/rootfs/usr/local/bin/
nvidia-container-runtime, nvidia-container-runtime-hook): a --gpus container gets the lab driver's
socket (/run/glm53-lab/gpu.sock) read-only at the same path - put in its OCI spec by the runtime
on `create`, or bind-mounted by the prestart hook when runc is the runtime - and every other call
and container goes to runc as it came."""

import importlib.util
import io
import json
import os
import subprocess
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BIN = REPO / "lab" / "image" / "node" / "rootfs" / "usr" / "local" / "bin"
SOCKET = "/run/glm53-lab/gpu.sock"
BUNDLE = "/run/containerd/io.containerd.runtime.v2.task/moby/" + "ab" * 32
HOOK_PATH = "/usr/local/bin/nvidia-container-runtime-hook"


def load(name):
    loader = SourceFileLoader(name.replace("-", "_"), str(BIN / name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


runtime = load("nvidia-container-runtime")
hook = load("nvidia-container-runtime-hook")


def gpu_spec(env="NVIDIA_VISIBLE_DEVICES=all", hooks=True, root="/var/lib/docker/overlay2/x/merged"):
    """A spec as dockerd writes it for `docker run --gpus all` (trimmed)."""
    spec = {"ociVersion": "1.0.2-dev", "root": {"path": root},
            "process": {"args": ["tensorfold", "serve"], "env": ["PATH=/usr/bin"] + ([env] if env else [])},
            "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}]}
    if hooks:
        spec["hooks"] = {"prestart": [{"path": HOOK_PATH, "args": ["nvidia-container-runtime-hook", "prestart"]}]}
    return spec


# --- the runtime shim ----------------------------------------------------------------------------

@pytest.mark.parametrize("args, expected", [
    # containerd-shim-runc-v2's call, global options first
    (["--root", "/var/run/docker/runtime-runc/moby", "--log", BUNDLE + "/log.json", "--log-format", "json",
      "create", "--bundle", BUNDLE, "--pid-file", BUNDLE + "/init.pid", "ab" * 32], ("create", BUNDLE)),
    (["--systemd-cgroup", "create", "-b", "/b", "id"], ("create", "/b")),
    (["create", "--bundle=/b2", "id"], ("create", "/b2")),
    (["run", "-b=/b3", "id"], ("run", "/b3")),
    (["create", "id"], ("create", "/cwd")),  # runc's default bundle: the working directory
    (["--root", "/r", "state", "id"], ("state", "/cwd")),
    ([], (None, "/cwd")),
])
def test_the_bundle_is_found_in_runcs_arguments(args, expected):
    assert runtime.command_and_bundle(args, "/cwd") == expected


@pytest.mark.parametrize("spec, gpu", [
    (gpu_spec(), True),
    (gpu_spec(hooks=False), True),  # the nvidia runtime as default, NVIDIA_VISIBLE_DEVICES set
    (gpu_spec(env=None), True),  # dockerd's hook only
    (gpu_spec(env="NVIDIA_VISIBLE_DEVICES=none", hooks=False), True),  # the driver without devices
    (gpu_spec(env="NVIDIA_VISIBLE_DEVICES=void", hooks=False), False),
    (gpu_spec(env=None, hooks=False), False),
    ({}, False),
])
def test_a_gpu_container_is_told_as_the_toolkit_tells_it(spec, gpu):
    assert runtime.is_gpu_spec(spec) is gpu
    assert hook.is_gpu_spec(spec) is gpu


def test_the_socket_goes_into_the_spec_once_read_only():
    spec = gpu_spec()
    edited, changed = runtime.with_driver_socket(spec)
    assert changed and spec["mounts"] == [{"destination": "/proc", "type": "proc", "source": "proc"}]  # a copy
    assert edited["mounts"][:-1] == spec["mounts"]
    assert edited["mounts"][-1] == {"destination": SOCKET, "type": "bind", "source": SOCKET,
                                    "options": ["rbind", "ro", "nosuid", "nodev", "noexec"]}
    assert runtime.with_driver_socket(edited) == (edited, False)


def write_bundle(tmp_path, spec):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps(spec))
    return bundle


def test_create_edits_a_gpu_containers_bundle_then_execs_runc(tmp_path, monkeypatch):
    socket_file = tmp_path / "gpu.sock"
    socket_file.write_text("")
    monkeypatch.setattr(runtime, "SOCKET", str(socket_file))
    bundle = write_bundle(tmp_path, gpu_spec())
    execs = []
    monkeypatch.setattr(runtime.os, "execvp", lambda path, argv: execs.append((path, argv)))
    args = ["--root", "/r", "create", "--bundle", str(bundle), "--pid-file", "/p", "cid"]
    runtime.main(args)
    assert execs == [("runc", ["runc"] + args)]
    mounts = json.loads((bundle / "config.json").read_text())["mounts"]
    assert [m["destination"] for m in mounts] == ["/proc", str(socket_file)]
    assert not list(bundle.glob("*.glm53-lab"))
    runtime.main(args)  # again (a retried create): still one mount
    assert len(json.loads((bundle / "config.json").read_text())["mounts"]) == 2


def test_other_containers_and_calls_go_to_runc_untouched(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime, "SOCKET", str(tmp_path / "missing.sock"))
    plain = gpu_spec(env=None, hooks=False)
    bundle = write_bundle(tmp_path, plain)
    before = (bundle / "config.json").read_bytes()
    execs = []
    monkeypatch.setattr(runtime.os, "execvp", lambda path, argv: execs.append(argv))
    runtime.main(["create", "--bundle", str(bundle), "cid"])
    runtime.main(["start", "cid"])  # no bundle read at all
    runtime.main(["delete", "--force", "cid"])
    assert (bundle / "config.json").read_bytes() == before
    assert execs == [["runc", "create", "--bundle", str(bundle), "cid"], ["runc", "start", "cid"],
                     ["runc", "delete", "--force", "cid"]]


def test_a_gpu_container_without_the_driver_fails_to_create(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runtime, "SOCKET", str(tmp_path / "missing.sock"))
    bundle = write_bundle(tmp_path, gpu_spec())
    monkeypatch.setattr(runtime.os, "execvp", lambda path, argv: pytest.fail("runc ran without the driver"))
    assert runtime.main(["create", "--bundle", str(bundle), "cid"]) == 1
    assert "driver not loaded" in capsys.readouterr().err


# --- the prestart hook ---------------------------------------------------------------------------

def test_the_hook_plans_a_mount_only_where_the_spec_lacks_one():
    state = {"ociVersion": "1.0.2", "id": "cid", "status": "created", "pid": 4242, "bundle": BUNDLE}
    assert hook.plan(state, gpu_spec()) == (4242, "/var/lib/docker/overlay2/x/merged")
    assert hook.plan(state, gpu_spec(root="rootfs")) == (4242, BUNDLE + "/rootfs")  # relative to the bundle
    assert hook.plan(state, runtime.with_driver_socket(gpu_spec())[0]) is None  # the runtime did it
    assert hook.plan(state, gpu_spec(env=None, hooks=False)) is None
    argv = hook.nsenter_argv(4242, "/var/lib/docker/overlay2/x/merged/")
    assert argv[:6] == ["nsenter", "--target", "4242", "--mount", "--", "sh"]
    assert argv[-3:] == ["/var/lib/docker/overlay2/x/merged", SOCKET, SOCKET]


def run_hook(monkeypatch, args, state, calls):
    monkeypatch.setattr(hook.sys, "stdin", io.StringIO(state if isinstance(state, str) else json.dumps(state)))

    def fake_run(argv, **kwargs):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(hook.subprocess, "run", fake_run)
    return hook.main(args)


def test_the_hook_mounts_the_socket_with_runc_as_the_runtime(tmp_path, monkeypatch, capsys):
    bundle = write_bundle(tmp_path, gpu_spec())
    state = {"pid": 4242, "bundle": str(bundle)}
    socket_file = tmp_path / "gpu.sock"
    monkeypatch.setattr(hook, "SOCKET", str(socket_file))
    calls = []
    assert run_hook(monkeypatch, ["prestart"], state, calls) == 1  # no driver socket
    assert "driver not loaded" in capsys.readouterr().err and calls == []
    socket_file.write_text("")
    assert run_hook(monkeypatch, ["prestart"], state, calls) == 0
    assert calls == [hook.nsenter_argv(4242, "/var/lib/docker/overlay2/x/merged")]
    assert run_hook(monkeypatch, ["poststop"], state, calls) == 0 and len(calls) == 1
    assert run_hook(monkeypatch, ["prestart"], "not json", calls) == 1


def test_the_hooks_mount_script_refuses_a_symlink_before_mounting(tmp_path):
    root = tmp_path / "rootfs"
    root.mkdir()
    (root / "run").symlink_to("/run")  # would resolve against the node's / before pivot_root
    done = subprocess.run(["sh", "-c", hook.MOUNT, "sh", str(root), SOCKET, SOCKET], capture_output=True, text=True,
                          check=False, timeout=30)
    assert done.returncode == 1 and "is a symlink: not mounting the driver socket" in done.stderr
    assert os.path.islink(root / "run") and not (root / "glm53-lab").exists()
