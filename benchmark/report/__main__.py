import sys

from benchmark.report.report_cli import main

sys.exit(main())
