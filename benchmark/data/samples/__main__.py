"""``python -m benchmark.data.samples``: rebuild the shipped SciFact sample from the ir_datasets cache."""

import sys
from pathlib import Path

from benchmark.data.samples import SCIFACT_FILE, build

out = Path(__file__).with_name(SCIFACT_FILE)
print(f"wrote {build(out)} abstracts to {out}", file=sys.stderr)
