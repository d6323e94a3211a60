"""The GPU check of issue 16, run by ``benchmarks/gpu_check.sh``: seed 003's fused vs
unfused Gemm (``Concat`` then one ``Gemm`` against two ``Gemm`` then ``Concat``) in float32
and float16 on CUDAExecutionProvider, inputs on the device once and outputs bound there
(``OrtBinding``), measured interleaved; then the provider every node ran on, from a profile.

    python benchmarks/gpu_check.py                  # on CUDA (onnxruntime-gpu and a GPU)
    python benchmarks/gpu_check.py --cpu --sizes 16 # dry run of the same code on the CPU

Not run on a GPU yet: written against ORT's documented API and run here with ``--cpu`` only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import TensorProto

from pytest_ortperf import models
from pytest_ortperf.measuring.calls import OrtBinding
from pytest_ortperf.measuring.engine import Engine, EngineConfig
from pytest_ortperf.measuring.feeds import input_specs, make_feeds
from pytest_ortperf.measuring.ortvalues import run_plain
from pytest_ortperf.measuring.session import OrtSession
from pytest_ortperf.stats import paired_ratio, ratio_of_blocks, summarize

DTYPES = (("float32", TensorProto.FLOAT), ("float16", TensorProto.FLOAT16))


def placement(session: OrtSession, feeds: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(node, op type, provider) of every node that ran, from one profiled run (Node
    events ``<node>_kernel_time`` carry ``args.op_name`` and ``args.provider``)."""
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        options = {"enable_profiling": True, "profile_file_prefix": os.path.join(tmp, "p")}
        profiled = session.derive(options=options)
        try:
            run_plain(profiled.sess, feeds)
        finally:
            path = profiled.sess.end_profiling()
        with open(path, encoding="utf-8") as f:
            events = json.load(f)
    nodes: dict[str, tuple[str, str]] = {}
    for event in events:
        name = str(event.get("name", ""))
        if event.get("cat") == "Node" and name.endswith("_kernel_time"):
            args = event.get("args", {})
            nodes[name[: -len("_kernel_time")]] = (
                str(args.get("op_name", "?")),
                str(args.get("provider", "?")),
            )
    return [(node, op, provider) for node, (op, provider) in nodes.items()]


def compare(unfused: OrtSession, fused: OrtSession, size: int, budget: float) -> dict[str, Any]:
    """One size: outputs checked, then both bindings measured interleaved."""
    feeds = make_feeds(input_specs(unfused.sess), dims={"M": size, "K": size, "N": size})
    slow, fast = OrtBinding(unfused, feeds), OrtBinding(fused, feeds)
    slow.run()
    fast.run()
    diff = float(
        np.abs(slow.outputs()[0].astype(np.float32) - fast.outputs()[0].astype(np.float32)).max()
    )
    engine = Engine(EngineConfig(budget_s=budget)).for_providers(unfused.sess.get_providers())
    ref, cand = engine.interleave([slow.call, fast.call], watch_cpu=False)
    estimate = paired_ratio(ratio_of_blocks(ref.values, cand.values))
    return {
        "size": size,
        "device": slow.device,
        "unfused_us": summarize(ref.values).median * 1e6,
        "fused_us": summarize(cand.values).median * 1e6,
        "ratio": estimate.ratio,
        "low": estimate.low,
        "high": estimate.high,
        "max_abs_diff": diff,
        "settled": ref.settled and cand.settled,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="dry run on CPUExecutionProvider")
    parser.add_argument("--sizes", default="256,512,1024", help="square sizes, comma-separated")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per comparison")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not args.cpu and hasattr(ort, "preload_dlls"):
        ort.preload_dlls()  # CUDA and cuDNN from the nvidia-* wheels, where installed
    available = ort.get_available_providers()
    print(f"onnxruntime {ort.__version__} ({ort.get_device()}); available: {available}")
    providers = ["CPUExecutionProvider"]
    if not args.cpu:
        if "CUDAExecutionProvider" not in available:
            print(
                "CUDAExecutionProvider is not available: install onnxruntime-gpu", file=sys.stderr
            )
            return 2
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    print(f"providers: {providers}")
    print(
        f"{'dtype':8} {'size':>5} {'device':6} {'unfused us':>11} {'fused us':>10} "
        f"{'fused/unfused':>13} {'95% CI':>17} {'max|diff|':>10} settled"
    )
    for label, dtype in DTYPES:
        unfused = OrtSession.create(
            models.gemm_concat(fused=False, dtype=dtype), providers=providers, name="unfused"
        )
        fused = OrtSession.create(
            models.gemm_concat(fused=True, dtype=dtype), providers=providers, name="fused"
        )
        for size in sizes:
            r = compare(unfused, fused, size, args.budget)
            print(
                f"{label:8} {size:>5} {r['device']:6} {r['unfused_us']:>11.1f} "
                f"{r['fused_us']:>10.1f} {r['ratio']:>13.3f} "
                f"[{r['low']:.3f}, {r['high']:.3f}]".rjust(17)
                + f" {r['max_abs_diff']:>10.3g} {r['settled']}"
            )
        feeds = make_feeds(
            input_specs(unfused.sess), dims={"M": sizes[0], "K": sizes[0], "N": sizes[0]}
        )
        for session in (unfused, fused):
            print(f"placement {label} {session.label}:")
            for node, op, provider in placement(session, feeds):
                print(f"  {node:40} {op:20} {provider}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
