"""Convert results folders of the earlier format (``manifest.json`` naming a machine-local runs
folder, plus ``metrics.csv``) into self-contained ones, from what they hold: the aggregates at 4
decimals, no per-query values (so no significance test), no FLOPS or telemetry.

With the runs folder at hand, ``python -m benchmark.report --refresh SUITE --runs-dir DIR`` converts
with everything instead. Usage: ``python scripts/convert_legacy_results.py results/smoke [...]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmark.report import publish
from benchmark.report.results import read_legacy


def convert(folder: Path) -> Path:
    return publish(read_legacy(folder), folder)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"converted {convert(Path(arg))}")
