import sys

from tensorfold.cli import main

sys.exit(main())
