"""ibdev2netdev_facts as Ansible runs it: real subprocesses, real `ip`, a test RDMA sysfs tree.

Only the vendor boundary is simulated: the RDMA sysfs tree, and `ibdev2netdev`
(a script on PATH that prints what the tool printed). Loopback is the one
interface every machine has with a known IPv4, so the simulated RDMA port sits
behind `lo`.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgx_spark.glm53.plugins.modules import ibdev2netdev_facts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULE = os.path.join(ROOT, "plugins", "modules", "ibdev2netdev_facts.py")
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "dgx_spark_real")
LO_GID = "0000:0000:0000:0000:0000:ffff:7f00:0001"  # ::ffff:127.0.0.1


def _write(path, text, mode=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
    if mode is not None:
        os.chmod(path, mode)


def _script(directory, name, body):
    """An executable shell script ``name`` in ``directory``."""
    _write(os.path.join(directory, name), "#!/bin/sh\n" + body, mode=0o755)


@pytest.fixture
def sysfs(tmp_path):
    """One RDMA port behind lo; its device/net/lo links to the real /sys/class/net/lo like the kernel's."""
    hca = tmp_path / "sys" / "class" / "infiniband" / "rocelo"
    base = hca / "ports" / "1"
    _write(str(base / "state"), "4: ACTIVE\n")
    for index, kind in ((2, "IB/RoCE v1"), (3, "RoCE v2")):
        _write(str(base / "gids" / str(index)), LO_GID + "\n")
        _write(str(base / "gid_attrs" / "types" / str(index)), kind + "\n")
        _write(str(base / "gid_attrs" / "ndevs" / str(index)), "lo\n")
    os.makedirs(str(hca / "device" / "net"))
    os.symlink("/sys/class/net/lo", str(hca / "device" / "net" / "lo"))
    return str(tmp_path / "sys")


def run_module(args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exc:
            ibdev2netdev_facts.main()
    result = json.loads(capsys.readouterr().out)
    return exc.value.code, result


def test_sysfs_walk_joined_with_real_ip(sysfs, capsys):
    code, result = run_module({"sysfs_root": sysfs, "source": "sysfs"}, capsys)
    assert code == 0, result
    assert result["changed"] is False
    facts = result["ansible_facts"]["ibdev2netdev"]
    assert facts["source"] == "sysfs" and facts["tool_error"] is None
    (port,) = facts["ports"]
    assert port["hca"] == "rocelo" and port["port"] == 1 and port["netdev"] == "lo"
    assert port["sysfs_state"] == "ACTIVE"
    assert "127.0.0.1/8" in port["ipv4"]
    assert port["mtu"] == 65536 and port["operstate"] == "UNKNOWN"
    assert port["gid_index"] == 3 and port["gid_ipv4"] == "127.0.0.1"
    # lo's carrier reads 1, so the tool would print (Up) although its operstate is UNKNOWN.
    assert port["state"] == "Up"


def test_tool_output_is_preferred_when_present(sysfs, tmp_path, capsys, monkeypatch):
    _script(str(tmp_path / "bin"), "ibdev2netdev",
            "echo 'rocelo port 1 ==> lo (Up) '\necho 'rocegone port 1 ==> nosuchdev0 (NA)'\n")
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path / "bin", os.environ.get("PATH", "")))
    code, result = run_module({"sysfs_root": sysfs}, capsys)
    assert code == 0, result
    facts = result["ansible_facts"]["ibdev2netdev"]
    assert facts["source"] == "tool"
    lo, gone = facts["ports"]
    assert lo["state"] == "Up" and lo["gid_index"] == 3 and lo["sysfs_state"] == "ACTIVE"
    assert gone["netdev"] == "nosuchdev0" and gone["state"] == "NA"
    assert gone["mtu"] is None and gone["sysfs_state"] is None


def test_tool_failure_is_reported_with_source_tool(tmp_path, capsys, monkeypatch):
    _script(str(tmp_path / "bin"), "ibdev2netdev", "echo 'cannot open /sys/class/infiniband' >&2\nexit 3\n")
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path / "bin", os.environ.get("PATH", "")))
    code, result = run_module({"source": "tool"}, capsys)
    assert code == 1 and result["failed"] is True
    assert "ibdev2netdev exited 3: cannot open /sys/class/infiniband" in result["msg"]
    assert "source=auto" in result["msg"]


def test_auto_falls_back_to_sysfs_when_the_tool_exits_non_zero(sysfs, tmp_path, capsys, monkeypatch):
    # What the real script does without /sys/class/infiniband: `exit -1`, no output.
    _script(str(tmp_path / "bin"), "ibdev2netdev", "exit 255\n")
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path / "bin", os.environ.get("PATH", "")))
    code, result = run_module({"sysfs_root": sysfs}, capsys)
    assert code == 0, result
    facts = result["ansible_facts"]["ibdev2netdev"]
    assert facts["source"] == "sysfs"
    assert facts["tool_error"] == "%s exited 255: no output" % (tmp_path / "bin" / "ibdev2netdev")
    assert [(p["hca"], p["netdev"], p["state"], p["gid_index"]) for p in facts["ports"]] == [("rocelo", "lo", "Up", 3)]


def test_source_tool_requires_the_tool(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    if any(os.path.exists(os.path.join(d, "ibdev2netdev")) for d in ("/sbin", "/usr/sbin", "/usr/local/sbin")):
        pytest.skip("ibdev2netdev is installed system-wide here")
    code, result = run_module({"source": "tool"}, capsys)
    assert code == 1
    assert "source=tool but ibdev2netdev is not installed" in result["msg"]


def test_no_rdma_devices_gives_empty_list(tmp_path, capsys):
    code, result = run_module({"sysfs_root": str(tmp_path), "source": "sysfs"}, capsys)
    assert code == 0
    assert result["ansible_facts"]["ibdev2netdev"]["ports"] == []


def test_address_option_picks_that_address(sysfs, capsys):
    code, result = run_module({"sysfs_root": sysfs, "source": "sysfs", "address": "127.0.0.1"}, capsys)
    assert code == 0, result
    facts = result["ansible_facts"]["ibdev2netdev"]
    assert facts["address"] == "127.0.0.1"
    assert facts["ports"][0]["gid_index"] == 3 and facts["ports"][0]["gid_ipv4"] == "127.0.0.1"


@pytest.mark.parametrize("address", ["198.18.1.10/24", "fe80::1", "link0"])
def test_address_must_be_a_plain_ipv4(sysfs, capsys, address):
    code, result = run_module({"sysfs_root": sysfs, "address": address}, capsys)
    assert code == 1
    assert result["msg"] == ("address must be a plain IPv4 address (the link address the engines use, "
                             "e.g. 198.18.1.10), got %r" % address)


@pytest.mark.parametrize("timeout", [0, -5, 301])
def test_timeout_is_range_checked(sysfs, capsys, timeout):
    code, result = run_module({"sysfs_root": sysfs, "timeout": timeout}, capsys)
    assert code == 1
    assert result["msg"].startswith("timeout must be a whole number of seconds from 1 to 300, got %d" % timeout)


def test_a_wedged_ibdev2netdev_fails_naming_it_and_the_timeout(sysfs, tmp_path, capsys, monkeypatch):
    # The shell waits on a child that keeps stdout open, like a `cat` stuck on a sysfs file.
    _script(str(tmp_path / "bin"), "ibdev2netdev", "sleep 60\n")
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path / "bin", os.environ.get("PATH", "")))
    started = time.monotonic()
    code, result = run_module({"sysfs_root": sysfs, "timeout": 1}, capsys)
    assert time.monotonic() - started < 15
    assert code == 1
    assert result["msg"] == ("ibdev2netdev did not finish within 1 s (timeout) and was killed: %s; check for a hung "
                             "driver or sysfs read, or raise timeout" % (tmp_path / "bin" / "ibdev2netdev"))


def test_a_wedged_ip_fails_naming_it_and_the_timeout(sysfs, tmp_path, capsys, monkeypatch):
    _script(str(tmp_path / "bin"), "ip", "sleep 60\n")
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path / "bin", os.environ.get("PATH", "")))
    started = time.monotonic()
    code, result = run_module({"sysfs_root": sysfs, "source": "sysfs", "timeout": 1}, capsys)
    assert time.monotonic() - started < 15
    assert code == 1
    assert result["msg"].startswith("ip did not finish within 1 s (timeout) and was killed: %s -j addr show"
                                    % (tmp_path / "bin" / "ip"))


def test_ip_without_json_is_a_clear_error(sysfs, tmp_path, capsys, monkeypatch):
    _script(str(tmp_path / "bin"), "ip", "echo '1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536'\n")
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path / "bin", os.environ.get("PATH", "")))
    code, result = run_module({"sysfs_root": sysfs, "source": "sysfs"}, capsys)
    assert code == 1
    assert result["msg"].startswith("`%s -j addr show` did not print the JSON list iproute2 prints"
                                    % (tmp_path / "bin" / "ip"))


# --- what a user sees: the real `ansible` command ---------------------------------------------

def _ansible(args, path=None):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    if path:
        env["PATH"] = "%s:%s" % (path, env.get("PATH", ""))
    return subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-m", "dgx_spark.glm53.ibdev2netdev_facts",
         "-a", args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("args, path_script, message", [
    ("sysfs_root=/nonexistent source=sysfs", None,
     "sysfs_root /nonexistent is not a directory: it must hold class/infiniband (/sys on a node); "
     "fix sysfs_root or leave it at the default /sys"),
    ("source=sysfs", ("ip", "echo 'not json'\n"), "did not print the JSON list iproute2 prints"),
])
def test_user_errors_read_clearly_in_ansible_output(tmp_path, args, path_script, message):
    path = None
    if path_script:
        path = str(tmp_path / "bin")
        _script(path, *path_script)
    proc = _ansible(args, path)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert "FAILED!" in output
    assert message in " ".join(output.split()), output
    assert "An exception occurred" not in output
    assert "traceback" not in output.lower()


# --- docs match the argument_spec the module really builds -----------------------------------

def test_documented_options_match_the_argument_spec(monkeypatch):
    built = {}

    class Recorder(object):
        def __init__(self, **kwargs):
            built.update(kwargs)
            raise RuntimeError("stop after AnsibleModule() is built")

    monkeypatch.setattr(ibdev2netdev_facts, "AnsibleModule", Recorder)
    with pytest.raises(RuntimeError):
        ibdev2netdev_facts.main()
    spec = built["argument_spec"]
    documented = yaml.safe_load(ibdev2netdev_facts.DOCUMENTATION)["options"]
    assert sorted(documented) == sorted(spec)
    for name, doc in documented.items():
        real = spec[name]
        assert doc.get("type", "str") == real.get("type", "str"), name
        assert doc.get("default") == real.get("default"), name
        assert doc.get("required", False) == real.get("required", False), name
        assert sorted(doc.get("choices") or []) == sorted(real.get("choices") or []), name
        assert doc.get("elements") == real.get("elements"), name
    assert built["supports_check_mode"] is True


# --- contract: captured output of a real DGX Spark ---------------------------------------------

def load_fixture(name):
    with open(os.path.join(FIXTURES, name + ".yml")) as handle:
        return yaml.safe_load(handle)


def _build_node(fixture, directory):
    """Lay out the fixture as a node: a sysfs tree and `ibdev2netdev`/`ip` scripts printing the capture."""
    sysfs_root = os.path.join(directory, "sys")
    for relpath, content in fixture["sysfs"].items():
        _write(os.path.join(sysfs_root, relpath), content)
    # device/net/<netdev> is the netdev's own directory, as the kernel links it; the pairs are
    # the ones ibdev2netdev printed.
    for line in fixture["ibdev2netdev"].splitlines():
        hca, netdev = line.split()[0], line.split()[4]
        net_dir = os.path.join(sysfs_root, "class", "infiniband", hca, "device", "net")
        os.makedirs(net_dir, exist_ok=True)
        os.symlink(os.path.join(sysfs_root, "class", "net", netdev), os.path.join(net_dir, netdev))
    bin_dir = os.path.join(directory, "bin")
    _write(os.path.join(directory, "ibdev2netdev.out"), fixture["ibdev2netdev"])
    _write(os.path.join(directory, "ip-addr.json"), json.dumps(fixture["ip_addr_json"]))
    _script(bin_dir, "ibdev2netdev", "exec cat '%s'\n" % os.path.join(directory, "ibdev2netdev.out"))
    _script(bin_dir, "ip", '[ "$*" = "-j addr show" ] || { echo "unexpected: ip $*" >&2; exit 2; }\n'
                           "exec cat '%s'\n" % os.path.join(directory, "ip-addr.json"))
    return sysfs_root, bin_dir


def observations_from_fixture(name, address=None, source="auto"):
    """The module's full result (what ``register:`` holds) on a node built from fixture ``name``.

    Runs the module file as Ansible does (a separate python reading its arguments
    from a JSON file) with the fixture's ``ibdev2netdev`` and ``ip`` first in PATH.
    """
    fixture = load_fixture(name)
    with tempfile.TemporaryDirectory() as directory:
        sysfs_root, bin_dir = _build_node(fixture, directory)
        args = {"sysfs_root": sysfs_root, "source": source}
        if address:
            args["address"] = address
        args_file = os.path.join(directory, "args.json")
        _write(args_file, json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ.get("PATH", "")),
                   PYTHONPATH=os.path.join(ROOT, ".collections"))
        proc = subprocess.run([sys.executable, MODULE, args_file], env=env, capture_output=True, text=True,
                              timeout=60, check=False)
    result = json.loads(proc.stdout)
    # The task executor adds these to every registered result.
    result.setdefault("failed", proc.returncode != 0)
    result.setdefault("changed", False)
    return result


def _summary(result):
    return [(p["hca"], p["netdev"], p["state"], p["operstate"], p["sysfs_state"], p["ipv4"], p["gid_index"])
            for p in result["ansible_facts"]["ibdev2netdev"]["ports"]]


SPARK_0E68 = [
    ("roceP2p1s0f0", "enP2p1s0f0np0", "Down", "DOWN", "DOWN", [], None),
    ("roceP2p1s0f1", "enP2p1s0f1np1", "Up", "UP", "ACTIVE", ["10.100.185.1/24"], 3),
    ("rocep1s0f0", "enp1s0f0np0", "Down", "DOWN", "DOWN", [], None),
    ("rocep1s0f1", "enp1s0f1np1", "Up", "UP", "ACTIVE", ["10.100.184.1/24"], 3),
]


def test_real_spark_port_map_through_the_tool():
    result = observations_from_fixture("spark-0e68")
    assert result["failed"] is False, result
    facts = result["ansible_facts"]["ibdev2netdev"]
    assert facts["source"] == "tool" and facts["unparsed"] == []
    assert _summary(result) == SPARK_0E68
    ports = dict((p["hca"], p) for p in facts["ports"])
    assert ports["rocep1s0f1"]["roce_v2_ipv4_gids"] == [{"ipv4": "10.100.184.1", "index": 3, "ndev": None}]
    assert ports["rocep1s0f1"]["gid_index_by_ipv4"] == {"10.100.184.1": 3}
    assert ports["rocep1s0f1"]["mtu"] == 1500 and ports["rocep1s0f1"]["link_layer"] == "Ethernet"


def test_real_spark_sysfs_walk_agrees_with_what_the_tool_printed():
    # The tool printed (Up) where carrier read 1 and (Down) where it read 0; the walk must too.
    result = observations_from_fixture("spark-0e68", source="sysfs")
    assert result["failed"] is False, result
    assert result["ansible_facts"]["ibdev2netdev"]["source"] == "sysfs"
    assert _summary(result) == SPARK_0E68


def test_real_spark_with_the_link_address():
    result = observations_from_fixture("spark-0e68", address="10.100.184.1")
    ports = dict((p["hca"], p) for p in result["ansible_facts"]["ibdev2netdev"]["ports"])
    assert (ports["rocep1s0f1"]["gid_index"], ports["rocep1s0f1"]["gid_ipv4"]) == (3, "10.100.184.1")
    # The second rail does not carry that address: it keeps its own.
    assert (ports["roceP2p1s0f1"]["gid_index"], ports["roceP2p1s0f1"]["gid_ipv4"]) == (3, "10.100.185.1")
