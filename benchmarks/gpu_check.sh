#!/usr/bin/env bash
# GPU check of pytest-ortperf (issue 16): installs onnxruntime-gpu and the package (editable)
# into a fresh virtual environment, runs the device tests (the CUDA ones run only where
# CUDAExecutionProvider is there), then seed 003's fused vs unfused Gemm in float32 and
# float16 on CUDAExecutionProvider with the provider of every node.
#
#   bash benchmarks/gpu_check.sh          # on a machine with an NVIDIA GPU and driver
#   bash benchmarks/gpu_check.sh --cpu    # dry run: the same steps with onnxruntime (CPU)
#
# NOT YET RUN ON A GPU: written against onnxruntime's documented API; only --cpu has run.
# Environment: PYTHON (default python3), VENV (default $TMPDIR/ortperf-gpu-check-venv), SIZES, BUDGET.
set -euo pipefail

cd "$(dirname "$0")/.."
mode="gpu"
if [[ "${1:-}" == "--cpu" ]]; then
    mode="cpu"
fi
python="${PYTHON:-python3}"
venv="${VENV:-${TMPDIR:-/tmp}/ortperf-gpu-check-venv}"
sizes="${SIZES:-256,512,1024}"
budget="${BUDGET:-1.0}"

"$python" -m venv "$venv"
# shellcheck disable=SC1091
source "$venv/bin/activate"
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e ".[test]"
if [[ "$mode" == "gpu" ]]; then
    # Both wheels install the module onnxruntime: keep only the GPU one. The [cuda,cudnn]
    # extras bring CUDA 12 and cuDNN 9 as pip wheels (onnxruntime.preload_dlls loads them).
    python -m pip uninstall --quiet -y onnxruntime
    python -m pip install --quiet "onnxruntime-gpu[cuda,cudnn]"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
    # the test process loads the pip CUDA libraries as gpu_check.py does
    nvidia_libs="$(python - <<'EOF'
import glob, os, site
dirs = []
for base in site.getsitepackages():
    dirs += glob.glob(os.path.join(base, "nvidia", "*", "lib"))
print(":".join(sorted(dirs)))
EOF
)"
    export LD_LIBRARY_PATH="${nvidia_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    python -c "import onnxruntime as o; print(o.__version__, o.get_available_providers())"
    python -m pytest tests/test_devices.py -q -rs -p no:cacheprovider
    python benchmarks/gpu_check.py --sizes "$sizes" --budget "$budget"
else
    python -m pytest tests/test_devices.py -q -rs -p no:cacheprovider
    python benchmarks/gpu_check.py --cpu --sizes "${SIZES:-16,32}" --budget "${BUDGET:-0.05}"
fi
