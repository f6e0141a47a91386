#!/usr/bin/env bash
# The day a GPU is lent: one command that checks lowlevel on the real driver and writes one
# report file. Installs the gpu extra (cuBLAS), prints `lowlevel info`, runs the real-driver
# test cases, the host-path benchmark on the real driver, and a cuBLAS SGEMM 4096^3 against
# the H200's FP32 peak (67 TFLOP/s). Meant to finish in under 8 minutes.
#
#     bash tools/gpu_check.sh [REPORT]        # default: gpu_check_report.txt
set -u
cd "$(dirname "$0")/.."
REPORT=${1:-gpu_check_report.txt}
: > "$REPORT"
section() { printf '\n==== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)" | tee -a "$REPORT"; }
run() { "$@" 2>&1 | tee -a "$REPORT"; return "${PIPESTATUS[0]}"; }

section "install: pip install -e '.[test,gpu]'"
run python -m pip install -q -e '.[test,gpu]' || exit 1
section "lowlevel info"
run env LOWLEVEL_DRIVER=cuda python -m lowlevel info || exit 1
section "the real-driver test cases (-k cuda), 5 minutes at most"
run timeout 300 python -m pytest -q -x --timeout 120 -k "cuda and not emu" tests
section "tools/bench_host.py --driver cuda"
run timeout 90 python tools/bench_host.py --driver cuda --runs 5 --number 1000
section "cuBLAS SGEMM 4096^3 against the FP32 peak"
run timeout 60 env LOWLEVEL_DRIVER=cuda python - <<'PY'
import numpy as np
import lowlevel as ll
from lowlevel import cuda
n, peak = 4096, 67e12                       # H200 SXM FP32 (non-tensor), the time model's figure
a, b = ll.randn(n, n, device="cuda"), ll.randn(n, n, device="cuda")
c = a @ b
cuda.synchronize()                          # warm: cuBLAS handle, kernels loaded
start, end = cuda.Event(), cuda.Event()
start.record()
for _ in range(10):
    c = a @ b
end.record(); end.synchronize()
seconds = start.elapsed_ms(end) / 1e3 / 10
flops = 2 * n**3 / seconds
sample = np.random.default_rng(0).integers(0, n, 64)
ref = a.numpy()[sample].astype(np.float64) @ b.numpy().astype(np.float64)
err = np.abs(c.numpy()[sample] - ref).max() / np.abs(ref).max()
print(f"sgemm {n}^3: {seconds * 1e3:.3f} ms, {flops / 1e12:.1f} TFLOP/s = {flops / peak:.0%} of {peak / 1e12:.0f}; "
      f"max relative error of 64 rows against float64: {err:.1e} ({cuda.get_driver().description})")
PY
section "done: report in $REPORT"
