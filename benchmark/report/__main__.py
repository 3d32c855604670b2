import sys

from benchmark.report.cli import main

sys.exit(main())
