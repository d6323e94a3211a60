"""Writes cuda_placement_base.json and cuda_placement_fallback.json beside this file.

Two runs each of an attention core on the CUDA provider, in the format ORT's profiler
writes (Session ``model_run``; Node ``<node>_kernel_time`` with string args ``op_name``,
``provider``, ``node_index``, sizes, type/shapes; Kernel events from CUPTI with ``op_name``,
``parent_name``, ``stream``, ``grid_*``, ``block_*``; memcpy activities with grid/block -1).
In the fallback recording the Softmax runs on the CPU, between a MemcpyToHost and a
MemcpyFromHost. Run: ``python tests/data/profiles/make_cuda_placement.py``.
"""

import json
from pathlib import Path

PID = 4242


def node(name, op, provider, idx, ts, dur, ins, outs):
    return {
        "cat": "Node",
        "pid": PID,
        "tid": PID,
        "dur": dur,
        "ts": ts,
        "ph": "X",
        "name": f"{name}_kernel_time",
        "args": {
            "op_name": op,
            "provider": provider,
            "node_index": str(idx),
            "activation_size": "2048",
            "parameter_size": "0",
            "output_size": "2048",
            "input_type_shape": ins,
            "output_type_shape": outs,
            "thread_scheduling_stats": "",
        },
    }


def kernel(kname, parent, op, ts, dur, grid, block, stream=13):
    return {
        "cat": "Kernel",
        "pid": PID,
        "tid": PID,
        "dur": dur,
        "ts": ts,
        "ph": "X",
        "name": kname,
        "args": {
            "op_name": op,
            "parent_name": parent,
            "stream": str(stream),
            "grid_x": str(grid[0]),
            "grid_y": str(grid[1]),
            "grid_z": str(grid[2]),
            "block_x": str(block[0]),
            "block_y": str(block[1]),
            "block_z": str(block[2]),
        },
    }


X = [{"float": [4, 16, 32]}]
W = [{"float": [32, 32]}]
S = [{"float": [4, 16, 16]}]
CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"


def run(start, fallback):
    ev = []
    t = start + 5

    def add(name, op, prov, idx, dur, ins, outs, kernels=()):
        nonlocal t
        ev.append(node(name, op, prov, idx, t, dur, ins, outs))
        kt = t + 2
        for kname, kdur, grid, block in kernels:
            ev.append(kernel(kname, name, op, kt, kdur, grid, block))
            kt += kdur + 1
        t += dur + 3

    add(
        "Memcpy",
        "MemcpyFromHost",
        CUDA,
        9,
        12,
        X,
        X,
        [("MemcpyHostToDevice", 3, (-1, -1, -1), (-1, -1, -1))],
    )
    add(
        "q_proj",
        "MatMul",
        CUDA,
        0,
        20,
        X + W,
        X,
        [
            (
                "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(Params)",
                8,
                (1, 1, 4),
                (128, 1, 1),
            )
        ],
    )
    add(
        "scores",
        "MatMul",
        CUDA,
        1,
        18,
        [*X, {"float": [4, 32, 16]}],
        S,
        [
            (
                "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(Params)",
                7,
                (1, 1, 4),
                (128, 1, 1),
            )
        ],
    )
    if fallback:  # Softmax fell back to the CPU: data goes to the host and back
        add(
            "Memcpy_token_4",
            "MemcpyToHost",
            CUDA,
            10,
            14,
            S,
            S,
            [("MemcpyDeviceToHost", 4, (-1, -1, -1), (-1, -1, -1))],
        )
        add("attn_softmax", "Softmax", CPU, 2, 40, S, S)
        add(
            "Memcpy_token_5",
            "MemcpyFromHost",
            CUDA,
            11,
            12,
            S,
            S,
            [("MemcpyHostToDevice", 3, (-1, -1, -1), (-1, -1, -1))],
        )
    else:
        add(
            "attn_softmax",
            "Softmax",
            CUDA,
            2,
            10,
            S,
            S,
            [
                (
                    "void onnxruntime::cuda::softmax_warp_forward<float, float, float, 4, false>(float*, const float*, int, int, int)",
                    4,
                    (1, 16, 1),
                    (128, 1, 1),
                )
            ],
        )
    add(
        "context",
        "MatMul",
        CUDA,
        3,
        18,
        S + X,
        X,
        [
            (
                "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(Params)",
                7,
                (1, 1, 4),
                (128, 1, 1),
            )
        ],
    )
    add(
        "Memcpy_token_1",
        "MemcpyToHost",
        CUDA,
        8,
        12,
        X,
        X,
        [("MemcpyDeviceToHost", 4, (-1, -1, -1), (-1, -1, -1))],
    )
    wall = t - start + 4
    return [
        {
            "cat": "Session",
            "pid": PID,
            "tid": PID,
            "dur": wall,
            "ts": start,
            "ph": "X",
            "name": "model_run",
            "args": {},
        },
        *ev,
    ]


def write(path, fallback):
    events = [
        {
            "cat": "Session",
            "pid": PID,
            "tid": PID,
            "dur": 180000,
            "ts": 12,
            "ph": "X",
            "name": "session_initialization",
            "args": {},
        }
    ]
    for start in (200000, 201000):
        events += run(start, fallback)
    Path(path).write_text("[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n")


if __name__ == "__main__":
    here = Path(__file__).parent
    write(here / "cuda_placement_base.json", False)
    write(here / "cuda_placement_fallback.json", True)
