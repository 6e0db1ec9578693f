"""The lab's simulated nvidia-smi (lab/image/node/rootfs/usr/local/bin/nvidia-smi): which
processes count as a running engine (the pure classifier), and --query-compute-apps listing
a real engine-shaped child process of this test while it runs, beside gpu.json's entries."""

import importlib.util
import json
import subprocess
import sys
import time
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "lab" / "image" / "node" / "rootfs" / "usr" / "local" / "bin" / "nvidia-smi"
QUERY = ["--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"]


def load_script():
    loader = SourceFileLoader("nvidia_smi_sim", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


smi = load_script()
TF_MIB = smi.ENGINE_MIB["tensorfold"]


@pytest.mark.parametrize("argv, comm, kind", [
    # The kit's rank: entrypoint.sh execs the console script; the kernel runs its shebang.
    (["/usr/bin/python3", "/usr/local/bin/tensorfold", "serve", "/root/.cache/huggingface/x", "--tp", "2"],
     "tensorfold", "tensorfold"),
    (["tensorfold", "serve", "/m"], "tensorfold", "tensorfold"),
    (["python3", "-m", "tensorfold", "serve", "/m"], "python3", "tensorfold"),
    (["/usr/bin/python3.11", "-u", "-X", "dev", "-mtensorfold", "serve", "/m"], "python3.11", "tensorfold"),
    (["python", "-um", "tensorfold", "serve"], "python", "tensorfold"),
    (["python3", "--", "/opt/bin/tensorfold", "serve", "/m"], "python3", "tensorfold"),
    (["/usr/local/bin/vllm", "serve", "zai-org/GLM-5.3"], "vllm", "vllm"),
    (["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "/m", "--tensor-parallel-size", "2"], "vllm", "vllm"),
    (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"], "python3", "vllm"),
    (["python3", "-m", "vllm.entrypoints.cli.main", "serve", "/m"], "python3", "vllm"),
    (["python3", "-m", "tensorfold.families.glm5_next.cuda.fastboot", "prepare", "/m"], "python3", "prepare"),
])
def test_engine_processes_are_recognised(argv, comm, kind):
    assert smi.engine_kind(argv, comm) == kind


@pytest.mark.parametrize("argv, comm", [
    # Clients and parents whose words name an engine: never the CUDA context's owner.
    (["docker", "run", "-d", "--name", "glm53-tf-r0", "--gpus", "all", "img", "tensorfold", "serve", "/m"], "docker"),
    (["ssh", "-o", "BatchMode=yes", "spark-worker", "docker", "run", "img", "tensorfold", "serve"], "ssh"),
    (["bash", "-c", "docker run -d img tensorfold serve /m"], "bash"),
    (["bash", "/usr/local/bin/tensorfold", "serve", "/m"], "bash"),
    (["/bin/sh", "-c", "exec tensorfold serve /m"], "sh"),
    (["/usr/bin/containerd-shim-runc-v2", "-namespace", "moby", "tensorfold", "serve"], "containerd-shim"),
    # A python that merely has the words in its arguments, or runs something else.
    (["python3", "-c", "import time; time.sleep(30)", "tensorfold", "serve", "/m"], "python3"),
    (["python3", "-", "tensorfold", "serve"], "python3"),
    (["python3", "/usr/local/bin/ansible-playbook", "tensorfold", "serve"], "python3"),
    (["python3", "-m", "pytest", "-k", "tensorfold serve"], "python3"),
    (["python3", "-m", "tensorfold", "--version"], "python3"),
    (["python3", "-m"], "python3"),
    (["python3"], "python3"),
    # Other commands of an engine, and look-alikes.
    (["tensorfold", "--version"], "tensorfold"),
    (["vllm", "bench", "serve"], "vllm"),
    (["/usr/local/bin/tensorfold-serve", "serve"], "tensorfold-serve"),
    (["grep", "tensorfold serve"], "grep"),
    (["glm53-lab-hung:nvidia-smi", "infinity"], "sleep"),
    # A tensorfold argv under a comm that cannot own a context (a shell's exec -a).
    (["tensorfold", "serve", "/m"], "bash"),
    ([], ""),
    ([""], ""),
])
def test_other_processes_are_not_engines(argv, comm):
    assert smi.engine_kind(argv, comm) is None


def fake_proc(root, entries):
    """A /proc-like tree: {pid: (argv or None, comm or None)}; None leaves the file out."""
    for pid, (argv, comm) in entries.items():
        folder = root / str(pid)
        folder.mkdir(parents=True)
        if argv is not None:
            (folder / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in argv))
        if comm is not None:
            (folder / "comm").write_text(comm + "\n")
    return root


def test_live_apps_reads_argv_and_comm_and_skips_what_vanished(tmp_path):
    proc = fake_proc(tmp_path / "proc", {
        812: (["/usr/bin/python3", "/usr/local/bin/tensorfold", "serve", "/m"], "tensorfold"),
        77: (["python3", "-m", "tensorfold.families.glm5_next.cuda.fastboot", "prepare"], "python3"),
        500: (["docker", "run", "img", "tensorfold", "serve"], "docker"),
        600: (["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "/m"], None),  # gone before comm was read
        700: (None, None),  # gone before anything was read
        701: ([], "kworker/0:1"),  # a kernel thread: empty cmdline
    })
    (proc / "self").mkdir()
    assert smi.live_apps(str(proc)) == [
        {"pid": 77, "name": "python3", "used_memory_mib": smi.ENGINE_MIB["prepare"]},
        {"pid": 812, "name": "/usr/bin/python3", "used_memory_mib": TF_MIB},
    ]
    assert smi.live_apps(str(tmp_path / "no-proc")) == []


def test_gpu_json_entries_come_first_and_keep_their_pid(tmp_path):
    proc = fake_proc(tmp_path / "proc", {
        812: (["tensorfold", "serve", "/m"], "tensorfold"),
        900: (["tensorfold", "serve", "/m"], "tensorfold"),
    })
    injected = {"pid": 900, "name": "vllm", "used_memory_mib": 20480}
    apps = smi.compute_apps({"compute_apps": [injected]}, str(proc))
    assert apps == [injected, {"pid": 812, "name": "tensorfold", "used_memory_mib": TF_MIB}]


@pytest.fixture(name="state")
def state_fixture(tmp_path, monkeypatch):
    """gpu.json as shipped, in a temporary file the script reads (smi.STATE)."""
    shipped = REPO / "lab" / "image" / "node" / "rootfs" / "etc" / "glm53-lab" / "gpu.json"
    path = tmp_path / "gpu.json"
    path.write_text(shipped.read_text())
    monkeypatch.setattr(smi, "STATE", str(path))
    return path


def run(capsys, *argv):
    rc = smi.main(list(argv))
    out = capsys.readouterr()
    assert rc == 0, out.err
    return out.out


def engine_script(tmp_path):
    """A console script named tensorfold whose shebang names this interpreter: exec'd with
    `serve`, it starts as the kit's entrypoint starts a rank (`exec tensorfold serve ...`)."""
    script = tmp_path / "bin" / "tensorfold"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    script.chmod(0o755)
    return [str(script), "serve", "/m", "--tp", "2"]


def running(*children):
    """Wait until each child's exec finished. Popen returns once the exec began closing the
    child's close-on-exec files, before the kernel has set up the new argv: /proc/PID/cmdline
    reads empty for that moment, and a process mid-exec owns no CUDA context to list."""
    for child in children:
        deadline = time.monotonic() + 10
        while not open("/proc/%d/cmdline" % child.pid, "rb").read() and time.monotonic() < deadline:
            time.sleep(0.01)
    return children


def stopped(*children):
    for child in children:
        child.kill()
        child.wait(timeout=10)


def test_gpu_is_idle_without_engines(state, monkeypatch, tmp_path, capsys):
    # This machine may run lab nodes whose engines its /proc shows: an empty one here.
    monkeypatch.setattr(smi, "PROC", str(tmp_path / "proc"))
    assert run(capsys, *QUERY) == ""
    assert run(capsys, "--query-gpu=utilization.gpu,pstate", "--format=csv,noheader") == "0 %, P8\n"
    assert "No running processes found" in run(capsys)


def test_a_running_engine_is_listed_live_and_gone_when_it_exits(tmp_path, state, capsys):
    assert json.loads(state.read_text())["compute_apps"] == []
    with subprocess.Popen(engine_script(tmp_path)) as child, \
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "tensorfold", "serve"]) as bystander:
        try:
            running(child, bystander)
            rows = run(capsys, *QUERY).splitlines()
            # The kernel ran the shebang: argv[0] is the interpreter, as for the kit's ranks.
            assert f"{child.pid}, {sys.executable}, {TF_MIB} MiB" in rows, rows
            # A python whose arguments merely name an engine is not one.
            assert not [r for r in rows if r.startswith(f"{bystander.pid},")], rows
            assert run(capsys, "--query-gpu=utilization.gpu,pstate", "--format=csv,noheader") == "97 %, P0\n"
            table = run(capsys)
            assert "No running processes found" not in table and f" {child.pid}      C   " in table, table
        finally:
            stopped(child, bystander)
    rows = run(capsys, *QUERY).splitlines()
    assert not [r for r in rows if r.startswith(f"{child.pid},")], rows


def test_an_injected_foreign_process_is_listed_beside_the_live_ones(tmp_path, state, capsys):
    # lab_faults.foreign_cuda_process appends to gpu.json's compute_apps.
    state.write_text(json.dumps(dict(json.loads(state.read_text()),
                                     compute_apps=[{"pid": 4242, "name": "python3", "used_memory_mib": 20480}])))
    with subprocess.Popen(engine_script(tmp_path)) as child:
        try:
            running(child)
            rows = run(capsys, "--query-compute-apps=pid,name", "--format=csv,noheader").splitlines()
        finally:
            stopped(child)
    assert rows[0] == "4242, python3", rows
    assert f"{child.pid}, {sys.executable}" in rows[1:], rows
    assert run(capsys, "--query-compute-apps=pid,name", "--format=csv,noheader").splitlines()[0] == "4242, python3"


def test_unknown_field_and_listing_are_unchanged(state, capsys):
    assert smi.main(["--query-compute-apps=pid,nonsense", "--format=csv"]) == 2
    assert 'Field "nonsense" is not a valid field to query.' in capsys.readouterr().err
    assert run(capsys, "-L").startswith("GPU 0: NVIDIA GB10 (UUID: GPU-")
    assert run(capsys, "--query-compute-apps=pid,used_memory", "--format=csv").splitlines()[0] == (
        "pid, used_memory [MiB]")
