"""Build the operations program as one zipapp: this collection's module_utils plus a __main__.

    bundle.py <plugins/module_utils dir> <output .pyz>

Deterministic (sorted names, one fixed date, fixed modes), so the same sources give the same
bytes and the copy to each node changes nothing on a rerun. Writes only when the bytes differ;
prints "changed" or "unchanged".
"""
import io
import os
import sys
import zipfile

PREFIX = "ansible_collections/dgx_spark/glm53/plugins/module_utils/"
MAIN = (
    "import sys\n"
    "from ansible_collections.dgx_spark.glm53.plugins.module_utils._ops_cli import main\n"
    "sys.exit(main())\n"
)
DATE = (2020, 1, 1, 0, 0, 0)


def build(source):
    buffer = io.BytesIO()
    buffer.write(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        entries = [("__main__.py", MAIN.encode())]
        # Regular packages, not namespace portions: this zip comes first on sys.path, so an
        # ansible_collections installed on the node (the ansible package) cannot shadow it.
        parts = PREFIX.rstrip("/").split("/")
        entries += [("/".join(parts[:depth]) + "/__init__.py", b"") for depth in range(1, len(parts) + 1)]
        for name in sorted(os.listdir(source)):
            if name.endswith(".py"):
                with open(os.path.join(source, name), "rb") as handle:
                    entries.append((PREFIX + name, handle.read()))
        for name, data in entries:
            info = zipfile.ZipInfo(name, DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            bundle.writestr(info, data)
    return buffer.getvalue()


def main(source, output):
    data = build(source)
    try:
        with open(output, "rb") as handle:
            if handle.read() == data:
                print("unchanged")
                return 0
    except OSError:
        pass
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    tmp = output + ".tmp"
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.chmod(tmp, 0o755)
    os.replace(tmp, output)
    print("changed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
