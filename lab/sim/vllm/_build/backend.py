"""PEP 517 build backend of the simulated vLLM, standard library only.

pip builds in an isolated environment holding the backend's ``requires``; there are
none, so ``pip install --no-deps lab/sim/vllm`` works in an image with no index. The
wheel is pure Python: the package under src/, its metadata and the console script
named in pyproject.toml.
"""

import base64
import hashlib
import os
import zipfile

import tomllib  # the image's python3 is 3.11 (Debian 12), which has it

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
TAG = "py3-none-any"


def read_project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        return tomllib.load(handle)["project"]


def dist_name(project):
    return "%s-%s" % (project["name"].replace("-", "_"), project["version"])


def metadata(project):
    lines = ["Metadata-Version: 2.1", "Name: " + project["name"], "Version: " + project["version"],
             "Summary: " + project.get("description", "")]
    if project.get("requires-python"):
        lines.append("Requires-Python: " + project["requires-python"])
    return ("\n".join(lines) + "\n").encode()


def package_files(name):
    """(path in the wheel, bytes) of every source file of the package, caches left out."""
    out = []
    for top, dirs, names in os.walk(os.path.join(SRC, name)):
        dirs[:] = sorted(item for item in dirs if item != "__pycache__")
        for item in sorted(names):
            if item.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(top, item)
            with open(path, "rb") as handle:
                out.append((os.path.relpath(path, SRC).replace(os.sep, "/"), handle.read()))
    return out


def wheel_files(project, editable):
    info = dist_name(project) + ".dist-info"
    # An editable install is a .pth line pointing at src/: edits show without a reinstall.
    files = ([("__editable__.%s.pth" % project["name"], (SRC + "\n").encode())] if editable
             else package_files(project["name"]))
    scripts = project.get("scripts", {})
    entry = "[console_scripts]\n" + "".join("%s = %s\n" % pair for pair in sorted(scripts.items()))
    files += [
        (info + "/METADATA", metadata(project)),
        (info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: vllm-sim-backend\nRoot-Is-Purelib: true\nTag: %s\n"
                           % TAG).encode()),
        (info + "/entry_points.txt", entry.encode()),
        (info + "/top_level.txt", (project["name"] + "\n").encode()),
    ]
    return info, files


def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build(wheel_directory, editable):
    project = read_project()
    info, files = wheel_files(project, editable)
    name = "%s-%s.whl" % (dist_name(project), TAG)
    record = "".join("%s,%s,%d\n" % (path, record_hash(data), len(data)) for path, data in files)
    record += info + "/RECORD,,\n"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for path, data in files:
            wheel.writestr(path, data)
        wheel.writestr(info + "/RECORD", record)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return build(wheel_directory, editable=False)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return build(wheel_directory, editable=True)
