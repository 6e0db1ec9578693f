"""Stand-in for the pip bootstrap script ansible-test downloads.

ansible-test builds each sanity venv without pip and fetches get-pip.py from a
host this workplace cannot reach. `make sanity` installs this file in its cache
slot instead: it puts the interpreter's bundled pip in place with ensurepip, then
installs the exact pip version ansible-test asked for from the package index.
Arguments are get-pip's: pip install arguments plus --no-setuptools/--no-wheel.
"""

import subprocess
import sys

OWN_FLAGS = ("--no-setuptools", "--no-wheel")


def main():
    args = [arg for arg in sys.argv[1:] if arg not in OWN_FLAGS]
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"],
                          stdout=subprocess.DEVNULL)
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet"] + args)


if __name__ == "__main__":
    main()
