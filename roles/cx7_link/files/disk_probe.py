# Free space for each directory the chosen serving path will fill, run on the node.
# argv[1]: JSON {"needs": {name: bytes}, "dirs": {name: path}}. Prints a JSON list of
# {name, path, need} plus: the nearest existing directory measured (`checked`), its
# filesystem (`dev`, `mount`), the bytes free to this user (`free`) and the bytes of
# regular files already under the directory (`present`), so a rerun after the
# download does not ask for the space the weights already use. Directories need not
# exist yet.
import json
import os
import sys


def mount_point(path):
    dev = os.stat(path).st_dev
    while path != os.path.dirname(path):
        parent = os.path.dirname(path)
        if os.stat(parent).st_dev != dev:
            break
        path = parent
    return path


def present_bytes(path):
    # Allocated size of regular files; symlinks (Hugging Face snapshots point into
    # blobs/) are not followed, so nothing is counted twice.
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                info = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if not os.path.islink(os.path.join(root, name)):
                total += info.st_blocks * 512
    return total


def probe(entry):
    out = dict(entry)
    path = os.path.realpath(os.path.expanduser(entry["path"]))
    checked = path
    while not os.path.isdir(checked) and checked != os.path.dirname(checked):
        checked = os.path.dirname(checked)
    try:
        stats = os.statvfs(checked)
        out.update(checked=checked, dev=os.stat(checked).st_dev, mount=mount_point(checked),
                   free=stats.f_bavail * stats.f_frsize,
                   present=present_bytes(path) if os.path.isdir(path) else 0)
    except OSError as exc:
        out.update(checked=checked, error="%s: %s" % (checked, exc.strerror))
    return out


def main(argv):
    spec = json.loads(argv[1])
    entries = [{"name": name, "path": spec["dirs"].get(name, name), "need": int(need)}
               for name, need in sorted(spec["needs"].items())]
    print(json.dumps([probe(entry) for entry in entries]))


main(sys.argv)
