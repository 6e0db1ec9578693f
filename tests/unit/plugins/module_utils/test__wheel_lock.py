"""_wheel_lock: the hash lock of an offline wheelhouse, and the roles' own locks
(roles/<role>/files/requirements-node.txt, which the node_venv role installs from): each pins
what its role pins, for every platform the locks support, in a form pip reads, and
`make node-requirements` regenerates every one of them."""

import glob
import hashlib
import os
import re

import pytest
import yaml

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _wheel_lock as lock

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
LOCK_ROLES = sorted(os.path.basename(os.path.dirname(os.path.dirname(path)))
                    for path in glob.glob(os.path.join(ROOT, "roles", "*", "files", "requirements-node.txt")))
# Per role, its packages with a wheel per platform (cpXY-cpXY, or abi3 per CPU); every other
# wheel of its lock runs anywhere (py3-none-any).
PLATFORM_WHEELS = {
    "hf_weights": {"pyyaml": "cp", "hf_xet": "abi3"},
    "vllm_nvfp4": {"charset_normalizer": "cp"},
}
A = "a" * 64
B = "b" * 64


def role_lock(role):
    with open(os.path.join(ROOT, "roles", role, "files", "requirements-node.txt")) as handle:
        return handle.read()


def role_pins(role):
    with open(os.path.join(ROOT, "roles", role, "vars", "main.yml")) as handle:
        pins = yaml.safe_load(handle)
    return pins["_%s_requirements" % role], pins["_%s_pip_version" % role]


def test_the_locks_are_those_of_hf_weights_and_vllm_nvfp4():
    # Guards the parametrized checks below against an empty or moved set of locks.
    assert LOCK_ROLES == ["hf_weights", "vllm_nvfp4"]
    assert sorted(PLATFORM_WHEELS) == LOCK_ROLES


def test_make_node_requirements_regenerates_every_lock_with_its_purpose():
    with open(os.path.join(ROOT, "Makefile")) as handle:
        makefile = handle.read()
    listed = re.search(r"^NODE_REQUIREMENTS \?= (.*)$", makefile, flags=re.M).group(1).split()
    assert sorted(listed) == LOCK_ROLES
    for role in LOCK_ROLES:
        purpose = re.search(r"^NODE_LOCK_PURPOSE_%s := (.+)$" % role, makefile, flags=re.M).group(1)
        assert role_lock(role).startswith("# dgx_spark.glm53 role %s: %s, hash-locked.\n" % (role, purpose))


@pytest.mark.parametrize("role", LOCK_ROLES)
def test_the_role_lock_pins_exactly_the_role_requirements_and_its_pip(role):
    requirements, pip_version = role_pins(role)
    wanted = set("%s==%s" % (re.sub(r"[-_.]+", "-", item.split("==")[0]).lower(), item.split("==")[1])
                 for item in requirements) | {"pip==%s" % pip_version}
    found = set(re.findall(r"^(\S+==\S+) \\$", role_lock(role), flags=re.M))
    assert found == wanted
    # The same through the parser offline_venv uses on the node.
    parsed = set("%s==%s" % (entry["key"], entry["version"]) for entry in lock.parse_lock(role_lock(role)))
    assert parsed == wanted


@pytest.mark.parametrize("role", LOCK_ROLES)
def test_the_role_lock_names_the_pins_it_was_made_from(role):
    assert ("# Made by `make node-requirements` from _%s_requirements and _%s_pip_version in\n"
            "# roles/%s/vars/main.yml: " % (role, role, role)) in role_lock(role)


@pytest.mark.parametrize("role", LOCK_ROLES)
@pytest.mark.parametrize("arch", ["aarch64", "x86_64"])
@pytest.mark.parametrize("python", ["cp311", "cp312", "cp313"])
def test_the_role_lock_has_a_wheel_of_each_platform_specific_package_for_every_platform(role, arch, python):
    files = re.findall(r"^# sha256:[0-9a-f]{64} (\S+\.whl)$", role_lock(role), flags=re.M)
    for package, kind in PLATFORM_WHEELS[role].items():
        tag = "-%s-%s-" % (python, python) if kind == "cp" else "-abi3-"
        assert [f for f in files if f.startswith(package + "-") and tag in f and arch in f], (package, python, arch)
    # Every other wheel runs anywhere.
    assert all(f.endswith("-py3-none-any.whl") for f in files
               if not f.startswith(tuple(package + "-" for package in PLATFORM_WHEELS[role])))


@pytest.mark.parametrize("role", LOCK_ROLES)
def test_the_role_lock_parses_and_names_each_hash_once(role):
    text = role_lock(role)
    entries = lock.parse_lock(text)
    assert len(entries) == len(re.findall(r"==", text))
    for entry in entries:
        assert sorted(entry["files"].values()) == sorted(entry["hashes"])


def test_render_then_parse_gives_the_same_lock():
    text = lock.render_lock([{"name": "tqdm", "version": "4.70.1", "files": {"tqdm-4.70.1-py3-none-any.whl": A}},
                             {"name": "pyyaml", "version": "6.0.4",
                              "files": {"pyyaml-6.0.4-cp312-cp312-manylinux_2_17_x86_64.whl": B,
                                        "pyyaml-6.0.4-cp312-cp312-manylinux_2_17_aarch64.whl": A}}], ["made here"])
    assert text == (
        "# made here\n"
        "\n"
        "# sha256:%s pyyaml-6.0.4-cp312-cp312-manylinux_2_17_aarch64.whl\n"
        "# sha256:%s pyyaml-6.0.4-cp312-cp312-manylinux_2_17_x86_64.whl\n"
        "pyyaml==6.0.4 \\\n    --hash=sha256:%s \\\n    --hash=sha256:%s\n"
        "\n"
        "# sha256:%s tqdm-4.70.1-py3-none-any.whl\n"
        "tqdm==4.70.1 \\\n    --hash=sha256:%s\n" % (A, B, A, B, A, A))
    parsed = lock.parse_lock(text)
    assert [(e["key"], e["version"], e["hashes"]) for e in parsed] == [
        ("pyyaml", "6.0.4", [A, B]), ("tqdm", "4.70.1", [A])]


@pytest.mark.parametrize("text, message", [
    ("tqdm>=4 --hash=sha256:%s\n" % A, "the lock line 1: 'tqdm>=4' is not name==version"),
    ("# sha256:%s tqdm-4.70.1-py3-none-any.whl\ntqdm==4.70.1\n" % A, "the lock line 2: tqdm==4.70.1 has no --hash"),
    ("tqdm==4.70.1 --hash=sha256:%s ; python_version < '3.12'\n" % A, "the lock line 1: ';' is not --hash=sha256:"),
    ("tqdm==4.70.1 --hash=md5:abc\n", "the lock line 1: '--hash=md5:abc' is not --hash=sha256:"),
    ("# sha256:%s tqdm-4.70.1-py3-none-any.whl\ntqdm==4.70.1 \\\n  --hash=sha256:%s\n" % (A, B),
     "the lock line 2: the file comments above tqdm==4.70.1 do not name exactly its hashes"),
    ("# sha256:%s t.whl\ntqdm==1 --hash=sha256:%s\n# sha256:%s t.whl\nTQDM==2 --hash=sha256:%s\n" % (A, A, A, A),
     "the lock line 4: TQDM is pinned again (first on line 2)"),
    ("# nothing\n", "the lock pins no package"),
])
def test_a_lock_pip_would_read_otherwise_or_not_at_all_is_refused(text, message):
    with pytest.raises(lock.LockError) as caught:
        lock.parse_lock(text)
    assert str(caught.value).startswith(message), str(caught.value)


def test_wheels_are_checked_against_the_lock_before_anything_runs(tmp_path):
    good = tmp_path / "tqdm-4.70.1-py3-none-any.whl"
    good.write_bytes(b"wheel")
    digest = hashlib.sha256(b"wheel").hexdigest()
    other = tmp_path / "rich-1.0-py3-none-any.whl"
    other.write_bytes(b"not pinned, never installed")
    entries = lock.parse_lock("# sha256:%s %s\ntqdm==4.70.1 --hash=sha256:%s\n" % (digest, good.name, digest))
    names = [good.name, other.name]
    assert lock.check_wheels(str(tmp_path), names, entries, "L") == [good.name]

    good.write_bytes(b"wheel, changed")
    with pytest.raises(lock.LockError) as caught:
        lock.check_wheels(str(tmp_path), names, entries, "L")
    assert str(caught.value).startswith("wheelhouse file %s: sha256 %s, but L has sha256 %s for that file "
                                        "(tqdm==4.70.1); refused, nothing was installed."
                                        % (good, hashlib.sha256(b"wheel, changed").hexdigest(), digest))

    renamed = tmp_path / "tqdm-4.70.1-py2.py3-none-any.whl"
    good.rename(renamed)
    with pytest.raises(lock.LockError) as caught:
        lock.check_wheels(str(tmp_path), [renamed.name], entries, "L")
    assert str(caught.value).startswith(
        "wheelhouse file %s: sha256 %s, which is none of the hashes L has for tqdm==4.70.1 (%s), and the lock names "
        "no file %s;" % (renamed, hashlib.sha256(b"wheel, changed").hexdigest(), digest, renamed.name))
