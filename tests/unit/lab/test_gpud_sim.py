"""The lab node's simulated GPU driver memory (lab/image/node/rootfs/usr/local/sbin/glm53-lab-gpud)
and the generator that puts the node's containers under its memory cgroup: the node's memory
from a fake cgroup v1 directory, the /proc/meminfo text (the kernel's format, one length every
time, written in place), the driver socket's answer, and the drop-in for docker.service."""

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
ROOTFS = REPO / "lab" / "image" / "node" / "rootfs"
SCRIPT = ROOTFS / "usr" / "local" / "sbin" / "glm53-lab-gpud"
GENERATOR = ROOTFS / "usr" / "local" / "lib" / "systemd" / "system-generators" / "glm53-lab-docker-cgroup"
MIB = 1 << 20
GIB = 1 << 30
NODE_ID = "210f06a9fd7f50d12f5a7a31471d44b1860f92c4db2a306ac970c7cc7feed9fb"


def load_script():
    loader = SourceFileLoader("glm53_lab_gpud", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


gpud = load_script()

# A controller's /proc/meminfo (kernel 6.18, 24 GiB) as the kernel prints it, a few lines left out.
KERNEL = """\
MemTotal:       24684092 kB
MemFree:        18828180 kB
MemAvailable:   23395344 kB
Buffers:          126428 kB
Cached:          2850588 kB
SwapCached:            0 kB
Active:           818240 kB
Inactive:        2566556 kB
Active(anon):        836 kB
Inactive(anon):   415992 kB
Active(file):     817404 kB
Inactive(file):  2150564 kB
Unevictable:       13036 kB
Mlocked:           11960 kB
SwapTotal:             0 kB
SwapFree:              0 kB
Zswap:                 0 kB
Zswapped:              0 kB
Dirty:              1328 kB
Writeback:             0 kB
AnonPages:        420720 kB
Mapped:           279800 kB
Shmem:              9048 kB
KReclaimable:    1925944 kB
Slab:            2050548 kB
SReclaimable:    1925944 kB
SUnreclaim:       124604 kB
KernelStack:        3792 kB
PageTables:         8328 kB
CommitLimit:    12342044 kB
Committed_AS:    1862064 kB
VmallocTotal:   34359738367 kB
VmallocUsed:       19220 kB
VmallocChunk:          0 kB
Percpu:             2808 kB
HugePages_Total:       0
HugePages_Free:        0
HugePages_Rsvd:        0
HugePages_Surp:        0
Hugepagesize:       2048 kB
Hugetlb:               0 kB
DirectMap4k:       28672 kB
DirectMap2M:     2068480 kB
DirectMap1G:    25165824 kB
"""

# A node's memory.stat (hierarchical totals last, as cgroup v1 lists them); 4 GiB limit.
STAT = {"cache": 3031040, "rss": 1175552, "total_cache": 1300 * MIB, "total_rss": 200 * MIB,
        "total_rss_huge": 0, "total_shmem": 2 * MIB, "total_mapped_file": 40 * MIB, "total_dirty": 30 * MIB,
        "total_writeback": 10 * MIB, "total_inactive_anon": 190 * MIB, "total_active_anon": 10 * MIB,
        "total_inactive_file": 1000 * MIB, "total_active_file": 298 * MIB, "total_unevictable": 0}


def write_cgroup(directory, limit=4 * GIB, usage=1600 * MIB, stat=None):
    os.makedirs(directory, exist_ok=True)
    for name, value in (("memory.limit_in_bytes", limit), ("memory.usage_in_bytes", usage)):
        Path(directory, name).write_text("%d\n" % value)
    text = "".join("%s %d\n" % item for item in (stat or STAT).items())
    Path(directory, "memory.stat").write_text(text)


@pytest.fixture(name="short_dir")
def fixture_short_dir():
    """A directory with a short path: a unix socket's path is limited to 107 bytes."""
    path = tempfile.mkdtemp(prefix="gpud-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def fake_kernel(tmp, text=KERNEL):
    path = os.path.join(tmp, "kernel-meminfo")
    Path(path).write_text(text)
    return os.open(path, os.O_RDONLY), path


# --- the node's cgroup ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, path", [
    ("4:memory:/docker/%s/init.scope\n0::/docker/%s/init.scope\n" % (NODE_ID, NODE_ID), "/docker/" + NODE_ID),
    ("9:name=systemd:/x\n4:memory:/docker/%s\n" % NODE_ID, "/docker/" + NODE_ID),
    ("3:cpu,memory:/docker/%s/\n" % NODE_ID, "/docker/" + NODE_ID),  # a combined mount, a trailing slash
    ("4:memory:/\n", None),  # the root: no node of its own
    ("0::/system.slice/docker-x.scope\n", None),  # cgroup v2: no memory line
])
def test_the_node_cgroup_is_pid_1s_memory_path_without_init_scope(text, path):
    assert gpud.node_cgroup(text) == path


def test_node_memory_from_the_cgroup_limit_usage_and_hierarchical_stat():
    stat = gpud.parse_stat("".join("%s %d\n" % item for item in STAT.items()) + "bogus x\n")
    assert stat["total_cache"] == 1300 * MIB and "bogus" not in stat
    node = gpud.node_memory(4 * GIB, 1600 * MIB, stat, 24 * GIB)
    assert node["MemTotal"] == 4 * GIB
    assert node["MemFree"] == 4 * GIB - 1600 * MIB  # limit - usage: page cache counts as used
    # Clean file pages come back at once: active + inactive file, less dirty and writeback.
    assert node["MemAvailable"] == node["MemFree"] + (298 + 1000 - 30 - 10) * MIB
    assert (node["Cached"], node["Buffers"], node["AnonPages"], node["Shmem"]) == (1300 * MIB, 0, 200 * MIB, 2 * MIB)
    assert (node["Dirty"], node["Writeback"], node["Mapped"]) == (30 * MIB, 10 * MIB, 40 * MIB)
    assert node["Active"] == 308 * MIB and node["Inactive(file)"] == 1000 * MIB
    assert (node["SwapTotal"], node["SwapFree"], node["SwapCached"]) == (0, 0, 0)  # --memory-swap = --memory
    assert sorted(node) == sorted(gpud.NODE_LINES)  # the lines the node owns, all of them kernel names
    assert set(node) <= set(gpud.parse_meminfo(KERNEL))


def test_node_memory_clamps_and_has_none_without_a_limit_of_its_own():
    over = gpud.node_memory(4 * GIB, 4 * GIB + MIB, dict(STAT, total_dirty=5 * GIB), 24 * GIB)
    assert over["MemFree"] == 0 and over["MemAvailable"] == 0  # usage a page over, all dirty
    full = gpud.node_memory(4 * GIB, 0, dict(STAT, total_active_file=8 * GIB), 24 * GIB)
    assert full["MemAvailable"] == 4 * GIB  # never more than the node has
    assert gpud.node_memory(9223372036854771712, GIB, STAT, 24 * GIB) is None  # unlimited
    assert gpud.node_memory(24 * GIB, GIB, STAT, 24 * GIB) is None


# --- /proc/meminfo text ---------------------------------------------------------------------------

def test_the_kernels_text_renders_back_byte_for_byte():
    lines = gpud.layout(KERNEL)
    assert gpud.render(lines, gpud.parse_meminfo(KERNEL), None) == KERNEL
    assert ("VmallocTotal", 11, True) in lines and ("HugePages_Total", 8, False) in lines


def test_this_machines_meminfo_renders_back_byte_for_byte():
    text = Path("/proc/meminfo").read_text()
    assert gpud.render(gpud.layout(text), gpud.parse_meminfo(text), None) == text


def test_the_node_lines_replace_the_kernels_and_the_length_never_changes():
    lines = gpud.layout(KERNEL)
    real = gpud.parse_meminfo(KERNEL)
    node = gpud.node_memory(4 * GIB, 1600 * MIB, STAT, real["MemTotal"])
    text = gpud.render(lines, real, node)
    values = gpud.parse_meminfo(text)
    for name, value in node.items():
        assert values[name] == value // 1024 * 1024, name
    assert values["Slab"] == real["Slab"] and values["HugePages_Total"] == 0  # the rest is the kernel's
    assert "MemFree:         2555904 kB\n" in text and text.startswith("MemTotal:        4194304 kB\n")
    lengths = {len(text)}
    for usage, free_real in ((0, 0), (4 * GIB, 99999999 * 1024), (GIB + 12345, 7)):
        other = gpud.node_memory(4 * GIB, usage, STAT, real["MemTotal"])
        lengths.add(len(gpud.render(lines, dict(real, Committed_AS=free_real), other)))
    assert lengths == {len(KERNEL)}
    # A kernel value that outgrows its width is clamped, never widened.
    huge = gpud.render(lines, dict(real, Committed_AS=10 ** 12 * 1024), node)
    assert len(huge) == len(KERNEL) and "Committed_AS:   99999999 kB\n" in huge


def test_the_driver_answer_is_the_nodes_or_the_kernels():
    real = gpud.parse_meminfo(KERNEL)
    node = gpud.node_memory(4 * GIB, 1600 * MIB, STAT, real["MemTotal"])
    assert gpud.driver_answer(node, real) == {"total": 4 * GIB, "free": 4 * GIB - 1600 * MIB,
                                              "cached": 1300 * MIB, "available": node["MemAvailable"]}
    assert gpud.driver_answer(None, real) == {"total": 24684092 * 1024, "free": 18828180 * 1024,
                                              "cached": 2850588 * 1024, "available": 23395344 * 1024}


# --- live: the cgroup read, the file written in place, the socket -----------------------------------

def test_memory_reads_the_cgroup_and_the_kernels_file_again_each_time(tmp_path):
    fd, path = fake_kernel(str(tmp_path))
    cgroup = str(tmp_path / "docker" / NODE_ID)
    write_cgroup(cgroup)
    memory = gpud.Memory(fd, gpud.Cgroup(cgroup))
    assert memory.answer()["free"] == 4 * GIB - 1600 * MIB
    write_cgroup(cgroup, usage=3 * GIB)  # more page cache: less free, at once
    Path(path).write_text(KERNEL.replace("Slab:            2050548", "Slab:            2050549"))
    text, real, node = memory.now()
    assert node["MemFree"] == GIB and real["Slab"] == 2050549 * 1024 and "2050549" in text
    shutil.rmtree(cgroup)  # unreadable after a good read: the last reading, never the kernel's
    assert memory.answer()["free"] == GIB
    # Never read (or no cgroup at all): the kernel's figures, not a crash.
    assert gpud.Memory(fd, gpud.Cgroup(cgroup)).answer()["total"] == 24684092 * 1024
    assert gpud.Memory(fd, gpud.Cgroup(None)).answer()["free"] == 18828180 * 1024
    os.close(fd)


def test_the_file_is_rewritten_in_place_at_one_length(tmp_path):
    path = str(tmp_path / "meminfo")
    lines = gpud.layout(KERNEL)
    real = gpud.parse_meminfo(KERNEL)
    Path(path).write_text("a previous run's longer text\n" * 100)
    meminfo = gpud.MeminfoFile(path, lines)
    inode = os.stat(path).st_ino
    reader = open(path)  # a reader holding the file open sees each update in it
    try:
        for usage in (100 * MIB, 3 * GIB, 0, 4 * GIB):
            assert meminfo.write(real, gpud.node_memory(4 * GIB, usage, STAT, real["MemTotal"]))
            reader.seek(0)
            text = reader.read()
            assert len(text) == len(KERNEL) and os.stat(path).st_size == len(KERNEL)
            assert gpud.parse_meminfo(text)["MemFree"] == (4 * GIB - usage) // 1024 * 1024
            assert os.stat(path).st_ino == inode  # never replaced
    finally:
        reader.close()
        os.close(meminfo.fd)


def test_the_driver_socket_answers_one_json_line_at_that_moment(tmp_path, short_dir):
    fd = fake_kernel(str(tmp_path))[0]
    cgroup = str(tmp_path / "node")
    write_cgroup(cgroup)
    path = os.path.join(short_dir, "gpu.sock")
    Path(path).write_text("a stale socket file")  # a previous run's: replaced
    server = gpud.DriverSocket(path, gpud.Memory(fd, gpud.Cgroup(cgroup)).answer).start()

    def ask():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(10)
            client.connect(path)
            data = b""
            while not data.endswith(b"\n"):
                chunk = client.recv(4096)
                assert chunk, "the connection closed before a whole line"
                data += chunk
            assert client.recv(4096) == b""  # one line, then closed
        return json.loads(data)

    try:
        assert oct(os.stat(path).st_mode & 0o777) == "0o666"
        first = ask()
        assert first == {"total": 4 * GIB, "free": 4 * GIB - 1600 * MIB, "cached": 1300 * MIB,
                         "available": first["available"]}
        write_cgroup(cgroup, usage=2 * GIB, stat=dict(STAT, total_cache=1800 * MIB))
        second = ask()
        assert (second["free"], second["cached"]) == (2 * GIB, 1800 * MIB)
    finally:
        server.close()
        os.close(fd)


def test_start_writes_the_file_and_says_ready(tmp_path, short_dir, monkeypatch):
    monkeypatch.setattr(gpud, "MEMINFO", str(tmp_path / "meminfo"))
    real = gpud.parse_meminfo(KERNEL)
    meminfo = gpud.start_file(gpud.layout(KERNEL), real, gpud.node_memory(4 * GIB, GIB, STAT, real["MemTotal"]),
                              mount=False)
    os.close(meminfo.fd)
    assert gpud.parse_meminfo((tmp_path / "meminfo").read_text())["MemFree"] == 3 * GIB
    # The kernel's own file, opened directly while nothing covers it (this machine).
    fd = gpud.real_meminfo_fd()
    try:
        assert os.read(fd, 65536).decode().startswith("MemTotal:")
    finally:
        os.close(fd)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind(os.path.join(short_dir, "notify"))
        monkeypatch.setenv("NOTIFY_SOCKET", os.path.join(short_dir, "notify"))
        gpud.notify("READY=1")
        assert systemd.recv(64) == b"READY=1"


def test_mounts_on_lists_the_binds_of_a_path_top_last():
    mountinfo = ("100 90 0:50 / /proc rw,nosuid - proc proc rw\n"
                 "200 100 0:60 /glm53-lab/meminfo /proc/meminfo ro - tmpfs tmpfs rw\n"
                 "300 200 0:60 /glm53-lab/kernel_kho/meminfo /proc/meminfo rw - tmpfs tmpfs rw\n")
    binds = gpud.mounts_on(mountinfo, "/proc/meminfo")
    assert binds == ["/glm53-lab/meminfo", "/glm53-lab/kernel_kho/meminfo"]
    assert gpud.is_ours(binds[0]) and not gpud.is_ours(binds[1])
    assert gpud.is_ours("/run/glm53-lab/meminfo")  # /run not a mount of its own
    assert gpud.mounts_on(mountinfo, "/proc/version") == []


# --- the docker.service drop-in -----------------------------------------------------------------------

def run_generator(tmp_path, proc1):
    cgroup = tmp_path / "proc1-cgroup"
    cgroup.write_text(proc1)
    out = tmp_path / "generator"
    subprocess.run(["sh", str(GENERATOR), str(out), str(tmp_path / "early"), str(tmp_path / "late")], check=True,
                   env=dict(os.environ, GLM53_LAB_PROC1_CGROUP=str(cgroup)), timeout=30)
    dropin = out / "docker.service.d" / "glm53-lab-engines.conf"
    return dropin.read_text() if dropin.exists() else None


def test_the_generator_nests_dockers_containers_under_the_node(tmp_path):
    assert os.access(GENERATOR, os.X_OK)
    text = run_generator(tmp_path, "9:name=systemd:/docker/%s/init.scope\n4:memory:/docker/%s/init.scope\n"
                         % (NODE_ID, NODE_ID))
    assert text.splitlines()[1:] == ["[Service]", 'Environment="DOCKER_OPTS=--cgroup-parent=/docker/%s/engines"'
                                     % NODE_ID]


@pytest.mark.parametrize("proc1", ["4:memory:/\n", "0::/init.scope\n", "4:memory:/docker/x y\n"])
def test_the_generator_leaves_docker_alone_without_a_node_cgroup(tmp_path, proc1):
    assert run_generator(tmp_path, proc1) is None


MEMORY_V1 = Path("/sys/fs/cgroup/memory")


@pytest.fixture
def scratch_cgroup():
    """A memory cgroup of its own under the controller's (cgroup v1, as the lab's nodes have)."""
    if not (MEMORY_V1 / "cgroup.event_control").exists():
        pytest.fail("needs cgroup v1's memory controller with cgroup.event_control, as the lab does")
    path = Path(tempfile.mkdtemp(prefix="glm53-gpud-", dir=MEMORY_V1))
    yield path
    subprocess.run(["sh", "-c", f"cat {path}/cgroup.procs | while read p; do echo $p > {MEMORY_V1}/cgroup.procs; done"],
                   check=False)
    path.rmdir()


def test_the_usage_thresholds_wake_it_when_the_nodes_memory_moves_and_not_before(scratch_cgroup, tmp_path):
    wake = gpud.Thresholds(str(scratch_cgroup))
    usage = int((scratch_cgroup / "memory.usage_in_bytes").read_text())
    assert wake.arm(usage) and wake.armed and wake.fds
    # Idle: no event, the wait lasts its timeout.
    started = time.monotonic()
    wake.wait(0.5)
    assert time.monotonic() - started >= 0.45
    # 3 x STEP of page cache charged to the cgroup (a file written by a process in it) wakes it
    # long before the timeout; a timeout of 30 s only bounds a failing run.
    wake.arm(int((scratch_cgroup / "memory.usage_in_bytes").read_text()))
    blob = tmp_path / "blob"
    writer = subprocess.Popen(["sh", "-c", f"echo $$ > {scratch_cgroup}/cgroup.procs && "
                               f"head -c {3 * gpud.STEP} /dev/zero > {blob}"])
    started = time.monotonic()
    wake.wait(30)
    woke = time.monotonic() - started
    writer.wait()
    assert woke < 15, woke
    assert int((scratch_cgroup / "memory.usage_in_bytes").read_text()) - usage >= gpud.STEP
    # A reading older than the usage now by STEP / 2 or more: rewrite at once.
    assert not wake.arm(usage)


def test_without_event_control_it_falls_back_to_polling(tmp_path):
    wake = gpud.Thresholds(str(tmp_path))  # no memory.usage_in_bytes there
    assert not wake.armed and wake.arm(123) is True
    started = time.monotonic()
    wake.wait(30)  # the polling period, not the timeout
    assert time.monotonic() - started < 5
