import sys

from benchmark.perf.cli import main

sys.exit(main())
