"""Short compute probes: a matmul checked against a float64 reference, and a gloo all-reduce.

A GPU can report clean counters and still compute wrong numbers; these catch that and
a broken collective stack before a job is placed.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from robodata.health.config import ProbePolicy
from robodata.health.findings import Finding, Level

WRONG_RESULT_EXIT = 3


def matmul_probe(policy: ProbePolicy) -> list[Finding]:
    import torch

    devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())] or ["cpu"]
    gen = torch.Generator().manual_seed(1234)
    n = policy.matmul_size
    a = torch.randn(n, n, generator=gen)
    b = torch.randn(n, n, generator=gen)
    ref = (a.double() @ b.double()).float()
    out: list[Finding] = []
    for index, device in enumerate(devices):
        gpu = index if device.startswith("cuda") else None
        prev_tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            t0 = time.perf_counter()
            got = (a.to(device) @ b.to(device)).cpu()
            seconds = time.perf_counter() - t0
        except RuntimeError as exc:
            out.append(Finding("probe.matmul", Level.FAULT, f"{device}: matmul raised {exc}", gpu))
            continue
        finally:
            torch.backends.cuda.matmul.allow_tf32 = prev_tf32
        data = {"device": device, "seconds": round(seconds, 4), "n": n}
        if not bool(torch.isfinite(got).all()):
            out.append(Finding("probe.matmul", Level.FAULT, f"{device}: non-finite values in result", gpu, data))
        elif not torch.allclose(got, ref, rtol=policy.matmul_rtol, atol=policy.matmul_rtol * n**0.5):
            err = float((got - ref).abs().max())
            out.append(
                Finding(
                    "probe.matmul",
                    Level.FAULT,
                    f"{device}: wrong result (max abs err {err:.3g})",
                    gpu,
                    {**data, "max_abs_err": err},
                )
            )
        else:
            out.append(
                Finding("probe.matmul", Level.INFO, f"{device}: {n}x{n} ok in {seconds * 1e3:.1f} ms", gpu, data)
            )
    return out


def _allreduce_rank(rank: int, world: int, init_file: str, timeout_s: float, ifname: str) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", ifname)
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world, timeout=timedelta(seconds=timeout_s)
    )
    try:
        t = torch.full((4096,), float(rank + 1))
        dist.all_reduce(t)
        expected = world * (world + 1) / 2
        if not bool((t == expected).all()):
            raise SystemExit(WRONG_RESULT_EXIT)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def allreduce_probe(policy: ProbePolicy) -> Finding:
    """`world_size` local processes all-reduce over gloo; the sum must be exact."""
    # forkserver: a fresh single-threaded server imports torch once, ranks fork from it
    # (cheaper than two spawned interpreters; safe where the caller's OpenMP pool exists).
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed", "robodata.health.probes"])
    world = policy.allreduce_world_size
    with tempfile.TemporaryDirectory(prefix="robodata-gloo-") as tmp:
        init_file = str(Path(tmp) / "rendezvous")
        procs = [
            ctx.Process(
                target=_allreduce_rank,
                args=(r, world, init_file, policy.allreduce_timeout_s, policy.allreduce_ifname),
                daemon=True,
            )
            for r in range(world)
        ]
        t0 = time.perf_counter()
        for p in procs:
            p.start()
        deadline = t0 + policy.allreduce_timeout_s + 30.0  # + interpreter/torch start-up
        for p in procs:
            p.join(max(0.0, deadline - time.perf_counter()))
        seconds = time.perf_counter() - t0
        hung = [p for p in procs if p.is_alive()]
        for p in hung:
            p.kill()
            p.join(5)
    codes = [p.exitcode for p in procs]
    data = {"world_size": world, "seconds": round(seconds, 2), "exit_codes": codes}
    if hung:
        return Finding(
            "probe.allreduce", Level.BLOCKING, f"gloo all-reduce hung ({len(hung)}/{world} ranks)", data=data
        )
    if WRONG_RESULT_EXIT in codes:
        return Finding("probe.allreduce", Level.FAULT, "gloo all-reduce returned a wrong sum", data=data)
    if any(c != 0 for c in codes):
        return Finding("probe.allreduce", Level.BLOCKING, f"gloo all-reduce failed (exit codes {codes})", data=data)
    return Finding("probe.allreduce", Level.INFO, f"gloo all-reduce over {world} ranks ok in {seconds:.1f}s", data=data)
