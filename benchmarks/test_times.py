# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where the test suite's time goes: seconds per module and the slowest tests, read from the
JUnit XML that `make integration` (and `make test`) writes to .build/integration.xml.

    .venv/bin/python benchmarks/test_times.py [.build/integration.xml ...] [--top 15]

Setup and teardown of module-scoped fixtures count toward the test that ran them, as pytest
reports them in the XML.
"""

import argparse
import collections
import sys
import xml.etree.ElementTree as ET


def cases(paths):
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            yield case.get("classname", ""), case.get("name", ""), float(case.get("time") or 0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("xml", nargs="*", default=[".build/integration.xml"])
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    rows = list(cases(args.xml))
    if not rows:
        print("no test cases in %s" % ", ".join(args.xml), file=sys.stderr)
        return 1
    modules = collections.defaultdict(lambda: [0, 0.0])
    for module, _name, seconds in rows:
        modules[module][0] += 1
        modules[module][1] += seconds
    print("%-52s %5s %9s" % ("module", "tests", "seconds"))
    for module, (count, seconds) in sorted(modules.items(), key=lambda kv: -kv[1][1]):
        print("%-52s %5d %9.1f" % (module, count, seconds))
    print("%-52s %5d %9.1f\n" % ("total", len(rows), sum(r[2] for r in rows)))
    print("%9s  %s" % ("seconds", "slowest tests"))
    for module, name, seconds in sorted(rows, key=lambda r: -r[2])[:args.top]:
        print("%9.1f  %s::%s" % (seconds, module.rsplit(".", 1)[-1], name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
