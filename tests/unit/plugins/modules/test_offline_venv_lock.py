"""offline_venv with the hf_weights role's hash lock (roles/hf_weights/files/requirements-node.txt),
through real ansible on localhost with a real wheelhouse downloaded against that lock: every
wheel checked before pip runs, pip run with --require-hashes, a wheel whose bytes differ from
the lock refused naming the file and both hashes, and the controller's download refusing a
file the lock does not pin. Expected hashes are read from the lock's text and computed with
hashlib here, never with the code under test."""

import glob
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys

import pytest

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._wheelhouse import locked_download_argv
from ansible_collections.dgx_spark.glm53.tests.unit.plugins import wheelhouse
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.modules.test_offline_venv import MARKER, ansible, in_env

LOCK = wheelhouse.ROLE_LOCK
with open(LOCK) as _handle:
    LOCK_TEXT = _handle.read()
# name==version of each requirement, and the lock's sha256 for each file it names.
PINS = dict(re.findall(r"^([A-Za-z0-9._-]+)==(\S+) \\$", LOCK_TEXT, flags=re.M))
FILE_HASHES = dict((name, digest)
                   for digest, name in re.findall(r"^# sha256:([0-9a-f]{64}) (\S+\.whl)$", LOCK_TEXT, flags=re.M))


def sha256(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


@pytest.fixture(scope="session")
def locked_wheels(interpreter):
    return wheelhouse.build_locked(platform.machine(), interpreter[1])


@pytest.fixture
def args(tmp_path, interpreter, locked_wheels):
    lock = tmp_path / "requirements-node.txt"
    shutil.copy(LOCK, str(lock))
    return {"path": str(tmp_path / "venv"), "wheelhouse": locked_wheels, "requirements_file": str(lock),
            "python": interpreter[0]}


def test_the_role_lock_installs_with_every_wheel_checked(args):
    first = ansible(args)
    assert first["changed"] is True and first["method"] == "venv", first
    files = sorted(name for name in os.listdir(args["wheelhouse"]) if name.endswith(".whl"))
    assert first["wheels_checked"] == files and len(files) == len(PINS)
    assert all(FILE_HASHES[name] == sha256(os.path.join(args["wheelhouse"], name)) for name in files)
    assert first["commands"][-1].endswith("--require-hashes -r %s" % args["requirements_file"]), first["commands"]
    assert dict((name.replace("_", "-").lower(), version) for name, version in first["installed"].items()) == PINS
    ran = in_env(first["python"], "import huggingface_hub, hf_xet, yaml; print(huggingface_hub.__version__)")
    assert ran.stdout.strip() == PINS["huggingface-hub"], ran.stderr
    with open(os.path.join(args["path"], MARKER)) as handle:
        assert json.load(handle)["lock"] == sha256(args["requirements_file"])
    again = ansible(args)
    assert again["changed"] is False and again["commands"] == [] and again["wheels_checked"] == []

    # Another lock (here: the same pins with one more comment line) makes the environment anew.
    with open(args["requirements_file"], "a") as handle:
        handle.write("# regenerated\n")
    renewed = ansible(args)
    assert renewed["changed"] is True and "hash lock changed" in renewed["msg"], renewed["msg"]
    assert renewed["commands"][0].endswith("-m venv --clear %s" % args["path"])


def test_a_wheel_whose_bytes_differ_from_the_lock_is_refused_naming_the_file_and_both_hashes(args, tmp_path):
    changed = tmp_path / "wheels"
    shutil.copytree(args["wheelhouse"], str(changed))
    name = "tqdm-%s-py3-none-any.whl" % PINS["tqdm"]
    with open(str(changed / name), "ab") as handle:
        handle.write(b"\0")
    args["wheelhouse"] = str(changed)
    result = ansible(args)
    assert result["failed"] is True
    assert result["msg"] == (
        "wheelhouse file %s: sha256 %s, but %s has sha256 %s for that file (tqdm==%s); refused, nothing was "
        "installed. The file differs from the one the lock was made from: delete it and the wheelhouse it was copied "
        "from (the node_venv role's is on the controller under node_venv_wheelhouse, which hf_weights sets from "
        "hf_weights_wheelhouse) and rerun, so both are "
        "downloaded again; if the package really changed, regenerate the lock with `make node-requirements`"
        % (changed / name, sha256(str(changed / name)), args["requirements_file"], FILE_HASHES[name], PINS["tqdm"]))
    assert not os.path.exists(args["path"])
    # Check mode reads the wheels too, so a dry run already says so.
    assert ansible(args, check=True)["msg"] == result["msg"]
    text = ansible(args, human=True)
    assert "differs from the one the lock was made from" in text
    assert "traceback" not in text.lower() and "exception" not in text.lower(), text


def test_the_controller_download_refuses_a_file_the_lock_does_not_pin(tmp_path, interpreter):
    lock = tmp_path / "lock.txt"
    lock.write_text("tqdm==%s \\\n    --hash=sha256:%s\n" % (PINS["tqdm"], "0" * 64))
    argv = locked_download_argv(platform.machine(), interpreter[1], str(lock), str(tmp_path / "wheels"),
                                pip_command=(sys.executable, "-m", "pip"))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode != 0
    assert "DO NOT MATCH THE HASHES" in proc.stderr and "Expected sha256 %s" % ("0" * 64) in proc.stderr, proc.stderr
    assert glob.glob(str(tmp_path / "wheels" / "*.whl")) == []
