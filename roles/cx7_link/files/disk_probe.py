# Free space for each directory the chosen serving path will fill, run on the node.
# argv[1]: JSON {"needs": {name: bytes}, "dirs": {name: path}}. Prints a JSON list of
# {name, path, need} with, per entry, the
# nearest existing directory that was measured, its filesystem (st_dev, mount point)
# and the bytes free to this user; directories need not exist yet.
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


def probe(entry):
    out = dict(entry)
    path = os.path.realpath(os.path.expanduser(entry["path"]))
    checked = path
    while not os.path.isdir(checked) and checked != os.path.dirname(checked):
        checked = os.path.dirname(checked)
    try:
        stats = os.statvfs(checked)
        out.update(checked=checked, dev=os.stat(checked).st_dev, mount=mount_point(checked),
                   free=stats.f_bavail * stats.f_frsize)
    except OSError as exc:
        out.update(checked=checked, error="%s: %s" % (checked, exc.strerror))
    return out


def main(argv):
    spec = json.loads(argv[1])
    entries = [{"name": name, "path": spec["dirs"].get(name, name), "need": int(need)}
               for name, need in sorted(spec["needs"].items())]
    print(json.dumps([probe(entry) for entry in entries]))


main(sys.argv)
