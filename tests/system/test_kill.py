"""SIGKILL mid-training, mid-encode, mid-index, after the run file, mid-publish; each rerun resumes the last; the
final metrics are identical to an uninterrupted run. The full set: python tests/helpers/kill_harness.py --all"""

from __future__ import annotations

import pytest

from helpers.kill_harness import CI_POINTS, check_chain

pytestmark = pytest.mark.slow  # kills and reruns a training pipeline


def test_kill_chain_then_rerun_gives_identical_metrics(tmp_path):
    assert check_chain(CI_POINTS, tmp_path) == CI_POINTS  # every point was reached and killed the run
