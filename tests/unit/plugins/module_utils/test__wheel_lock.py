"""_wheel_lock: the hash lock of an offline wheelhouse, and the role's own lock
(roles/hf_weights/files/requirements-node.txt): it pins what the role pins, for every platform
the role supports, in a form pip reads."""

import hashlib
import os
import re

import pytest
import yaml

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _wheel_lock as lock

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "hf_weights")
with open(os.path.join(ROLE, "files", "requirements-node.txt")) as _handle:
    ROLE_LOCK = _handle.read()
A = "a" * 64
B = "b" * 64


def test_the_role_lock_pins_exactly_the_role_requirements_and_its_pip():
    with open(os.path.join(ROLE, "vars", "main.yml")) as handle:
        pins = yaml.safe_load(handle)
    wanted = set("%s==%s" % (re.sub(r"[-_.]+", "-", item.split("==")[0]).lower(), item.split("==")[1])
                 for item in pins["_hf_weights_requirements"]) | {"pip==%s" % pins["_hf_weights_pip_version"]}
    found = set(re.findall(r"^(\S+==\S+) \\$", ROLE_LOCK, flags=re.M))
    assert found == wanted


@pytest.mark.parametrize("arch", ["aarch64", "x86_64"])
@pytest.mark.parametrize("python", ["cp311", "cp312", "cp313"])
def test_the_role_lock_has_a_wheel_of_each_platform_specific_package_for_every_platform(arch, python):
    files = re.findall(r"^# sha256:[0-9a-f]{64} (\S+\.whl)$", ROLE_LOCK, flags=re.M)
    assert [f for f in files if f.startswith("pyyaml-") and "-%s-%s-" % (python, python) in f and arch in f]
    assert [f for f in files if f.startswith("hf_xet-") and "-abi3-" in f and arch in f]
    # Every other wheel runs anywhere.
    assert all(f.endswith("-py3-none-any.whl") for f in files if not f.startswith(("pyyaml-", "hf_xet-")))


def test_the_role_lock_parses_and_names_each_hash_once():
    entries = lock.parse_lock(ROLE_LOCK)
    assert len(entries) == len(re.findall(r"==", ROLE_LOCK))
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
