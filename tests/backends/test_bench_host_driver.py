"""tools/bench_host.py --driver cuda without a real GPU: a clear skip (why, and what to run
instead), exit status 0, not a traceback."""
import pathlib
import subprocess
import sys

import pytest

from lowlevel import cuda

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_real_driver_column_skips_with_the_reason_where_there_is_no_gpu():
    why_not = cuda.real_driver_status()
    if not why_not:
        pytest.skip("a real GPU is here: the real-driver bench would run in full")
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_host.py"), "--driver", "cuda"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "skipped, no real GPU here" in result.stdout and why_not in result.stdout
    assert "Traceback" not in result.stderr
