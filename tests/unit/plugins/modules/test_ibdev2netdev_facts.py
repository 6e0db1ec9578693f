"""ibdev2netdev_facts end to end in-process: a test RDMA sysfs tree joined with this machine's real `ip -j addr`.

Loopback is the one interface every machine has with a known IPv4, so the
fake RDMA port is put behind `lo`.
"""

import json
import os
import stat

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgx_spark.glm53.plugins.modules import ibdev2netdev_facts

LO_GID = "0000:0000:0000:0000:0000:ffff:7f00:0001"  # ::ffff:127.0.0.1


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


@pytest.fixture
def sysfs(tmp_path):
    base = tmp_path / "sys" / "class" / "infiniband" / "rocelo" / "ports" / "1"
    _write(str(base / "state"), "4: ACTIVE\n")
    for index, (gid, kind) in enumerate([(LO_GID, "IB/RoCE v1"), (LO_GID, "RoCE v2")]):
        _write(str(base / "gids" / str(index + 2)), gid + "\n")
        _write(str(base / "gid_attrs" / "types" / str(index + 2)), kind + "\n")
        _write(str(base / "gid_attrs" / "ndevs" / str(index + 2)), "lo\n")
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
    assert facts["source"] == "sysfs"
    (port,) = facts["ports"]
    assert port["hca"] == "rocelo" and port["port"] == 1 and port["netdev"] == "lo"
    assert port["sysfs_state"] == "ACTIVE"
    assert "127.0.0.1/8" in port["ipv4"]
    assert port["mtu"] > 0 and port["operstate"]
    assert port["gid_index"] == 3
    # lo's operstate is UNKNOWN, which ibdev2netdev prints as Down.
    assert port["state"] == ("Up" if port["operstate"].lower() == "up" else "Down")


def test_tool_output_is_preferred_when_present(sysfs, tmp_path, capsys, monkeypatch):
    tool = tmp_path / "bin" / "ibdev2netdev"
    _write(str(tool), "#!/bin/sh\necho 'rocelo port 1 ==> lo (Up) '\necho 'rocegone port 1 ==> nosuchdev0 (Down)'\n")
    os.chmod(str(tool), os.stat(str(tool)).st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", "%s:%s" % (tool.parent, os.environ.get("PATH", "")))
    code, result = run_module({"sysfs_root": sysfs}, capsys)
    assert code == 0, result
    facts = result["ansible_facts"]["ibdev2netdev"]
    assert facts["source"] == "tool"
    lo, gone = facts["ports"]
    assert lo["state"] == "Up" and lo["gid_index"] == 3 and lo["sysfs_state"] == "ACTIVE"
    assert gone["netdev"] == "nosuchdev0" and gone["mtu"] is None and gone["sysfs_state"] is None


def test_tool_failure_is_reported(tmp_path, capsys, monkeypatch):
    tool = tmp_path / "bin" / "ibdev2netdev"
    _write(str(tool), "#!/bin/sh\necho 'cannot open /sys/class/infiniband' >&2\nexit 3\n")
    os.chmod(str(tool), 0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (tool.parent, os.environ.get("PATH", "")))
    code, result = run_module({"source": "tool"}, capsys)
    assert code == 1
    assert result["failed"] is True
    assert "ibdev2netdev failed (rc=3)" in result["msg"] and "cannot open" in result["msg"]


def test_source_tool_requires_the_tool(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    if any(os.path.exists(os.path.join(d, "ibdev2netdev")) for d in ("/sbin", "/usr/sbin", "/usr/local/sbin")):
        pytest.skip("ibdev2netdev is installed system-wide here")
    code, result = run_module({"source": "tool"}, capsys)
    assert code == 1 and "ibdev2netdev" in result["msg"]


def test_no_rdma_devices_gives_empty_list(tmp_path, capsys):
    code, result = run_module({"sysfs_root": str(tmp_path), "source": "sysfs"}, capsys)
    assert code == 0
    assert result["ansible_facts"]["ibdev2netdev"]["ports"] == []
