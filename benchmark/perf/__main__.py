import sys

from benchmark.perf.perf_cli import main

sys.exit(main())
