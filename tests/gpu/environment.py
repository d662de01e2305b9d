"""The environment step: what GPU, driver, CUDA runtime and NCCL the kit runs
on, where PyTorch's NCCL and CUDA runtime libraries are (the later steps load
exactly those), and which RDMA devices the machine has (whether an IB verbs
transport of our own could ever be tested there).

`python3 environment.py --out FILE` writes the JSON and prints it. Without a
GPU (no nvidia-smi, or torch sees no device) it exits 77.
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys

SKIPPED = 77


def run(argv, timeout=20):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return {"exit": p.returncode, "out": (p.stdout + p.stderr).strip()[-4000:]}
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"exit": None, "out": str(e)}


def rdma_devices():
    root = "/sys/class/infiniband"
    info = {"sys_class_infiniband": sorted(os.listdir(root)) if os.path.isdir(root) else None}
    info["ibv_devinfo"] = run(["ibv_devinfo"]) if shutil.which("ibv_devinfo") else "not installed"
    return info


def installed_library(name):
    """libNAME.so* that PyTorch would use when it has not mapped one yet: the
    pip wheels' nvidia/*/lib folders first, then the loader's search path."""
    import ctypes.util
    import glob
    for base in sys.path:
        for path in sorted(glob.glob(os.path.join(base, "nvidia", "*", "lib", f"lib{name}.so*"))):
            return path
    found = ctypes.util.find_library(name)
    return found


def gpu_environment():
    info = {"python": sys.version.split()[0], "kernel": platform.release(), "cpus": os.cpu_count(),
            "rdma": rdma_devices()}
    if shutil.which("nvidia-smi") is None:
        info["skip"] = "no nvidia-smi"
        return info
    info["nvidia_smi"] = run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,pci.bus_id",
                              "--format=csv,noheader"])
    if shutil.which("nvcc"):
        info["nvcc"] = run(["nvcc", "--version"])["out"].splitlines()[-1:]
    try:
        import torch
    except ImportError as e:
        info["skip"] = f"python3 has no torch: {e}"
        return info
    info["torch"] = torch.__version__
    if not torch.cuda.is_available():
        info["skip"] = "torch sees no CUDA device"
        return info
    torch.cuda.init()
    props = torch.cuda.get_device_properties(0)
    info["device"] = props.name
    info["device_memory_gib"] = round(props.total_memory / 2**30, 1)
    info["cuda_runtime"] = torch.version.cuda
    info["torch_nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import nccl_ctypes
    info["nccl_library"] = nccl_ctypes.loaded_library("libnccl.so") or installed_library("nccl")
    info["cudart_library"] = nccl_ctypes.loaded_library("libcudart.so") or installed_library("cudart")
    if info["nccl_library"]:
        info["nccl_version"] = nccl_ctypes.Nccl(info["nccl_library"]).version()[1]
    else:
        info["skip"] = "torch has not loaded a libnccl"
    return info


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    a = p.parse_args()
    info = gpu_environment()
    with open(a.out, "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info))
    return SKIPPED if "skip" in info else 0


if __name__ == "__main__":
    sys.exit(main())
