"""A PEP 517 build backend for the simulated TensorFold, standard library only.

pip builds in an isolated environment with the backend's ``requires``; ours are
none, so ``pip install --no-deps DIR`` works without an index. It builds a pure
wheel of ``src/tensorfold`` with the console script from pyproject.toml.
"""

import base64
import hashlib
import os
import re
import zipfile

try:
    import tomllib
except ImportError:  # Python < 3.11: our pyproject.toml is simple enough to read by hand
    tomllib = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
TAG = "py3-none-any"


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        raw = handle.read()
    if tomllib is not None:
        return tomllib.loads(raw.decode("utf-8"))["project"]
    project, table = {"scripts": {}}, None
    for line in raw.decode("utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("["):
            table = line.strip("[]")
            continue
        match = re.match(r'([\w.-]+)\s*=\s*"(.*)"$', line)
        if match and table == "project":
            project[match.group(1)] = match.group(2)
        elif match and table == "project.scripts":
            project["scripts"][match.group(1)] = match.group(2)
    return project


def _dist(project):
    return "%s-%s" % (project["name"].replace("-", "_"), project["version"])


def _metadata(project):
    lines = ["Metadata-Version: 2.1", "Name: %s" % project["name"], "Version: %s" % project["version"],
             "Summary: %s" % project.get("description", "")]
    if project.get("requires-python"):
        lines.append("Requires-Python: %s" % project["requires-python"])
    return "\n".join(lines) + "\n"


def _files(project, editable):
    dist_info = _dist(project) + ".dist-info"
    files = []
    if editable:
        files.append(("__editable__.%s.pth" % project["name"], (SRC + "\n").encode()))
    else:
        for top, dirs, names in os.walk(os.path.join(SRC, "tensorfold")):
            dirs[:] = sorted(name for name in dirs if name != "__pycache__")
            for name in sorted(names):
                if name.endswith((".pyc", ".pyo")):
                    continue
                path = os.path.join(top, name)
                with open(path, "rb") as handle:
                    files.append((os.path.relpath(path, SRC).replace(os.sep, "/"), handle.read()))
    scripts = project.get("scripts", {})
    entry = "[console_scripts]\n" + "".join("%s = %s\n" % item for item in sorted(scripts.items()))
    files += [
        (dist_info + "/METADATA", _metadata(project).encode()),
        (dist_info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: tensorfold-sim-backend\nRoot-Is-Purelib: true\n"
                                "Tag: %s\n" % TAG).encode()),
        (dist_info + "/entry_points.txt", entry.encode()),
        (dist_info + "/top_level.txt", b"tensorfold\n"),
    ]
    return dist_info, files


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "sha256=" + digest


def _build(wheel_directory, editable):
    project = _project()
    dist_info, files = _files(project, editable)
    name = "%s-%s.whl" % (_dist(project), TAG)
    record = "".join("%s,%s,%d\n" % (path, _record_hash(data), len(data)) for path, data in files)
    record += "%s/RECORD,,\n" % dist_info
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for path, data in files:
            wheel.writestr(path, data)
        wheel.writestr(dist_info + "/RECORD", record)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _build(wheel_directory, editable=False)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _build(wheel_directory, editable=True)
