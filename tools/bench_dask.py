#!/usr/bin/env python3
"""Time polygemm.dask.gemm against dask.array.matmul on the same CuPy-chunked arrays, on 1 and 2 GPUs.

One run does every GPU count (a fresh cluster per count, one worker per GPU) and both
implementations on the same persisted inputs, so the figures compare like with like:

    python3 tools/bench_dask.py --gpus 1,2 --size 32768 --chunk 8192 \\
        --json r.json --markdown r.md

On the two-H200 machine (no network: PyCUDA from .gpu/wheels, dask & co. from .whl, both carried):

    source .gpu/setup.sh && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PYTHONPATH && \
        python3 tools/bench_dask.py --gpus 1,2 --json $OUT/h200x2_dask.json

(.whl/cuda-core/*.whl only if ``import dask_cuda`` fails on the image's cuda-core; without
dask-cuda the tool falls back to one Nanny per GPU by itself.)

Cluster: ``dask_cuda.LocalCUDACluster`` when dask-cuda imports (``--cluster dask-cuda``), else a
``distributed`` cluster of one Nanny per GPU, each with its own ``CUDA_VISIBLE_DEVICES``
(``--cluster distributed``; what LocalCUDACluster does, minus its memory/spill extras). Both
talk TCP unless ``--protocol`` says otherwise (UCX needs ucx-py/ucxx, not in the wheels).

Inputs: random blocks made on the workers (CuPy), persisted before timing. ``--inputs``
``persist`` times the product from where the scheduler left the blocks (transfers between
GPUs included; before each run the input blocks are brought back to one copy each, so no run
finds the copies the last one fetched); ``replicate`` copies every input block to every
worker first (the product alone: no input traffic). Both by default on 2+ GPUs; 1 GPU has nothing to move.

Timing of one product: ``persist`` the result, wait for every block, then synchronize every
worker's GPU (the kernels are queued asynchronously, as CuPy and polygemm do), wall clock
around all of it; the first run is a warm-up (kernel builds, memory pools), then the best of
``--repeat``. From the distributed task stream: the sum of task durations (on GPUs the host
time of the task: launches, not the GPU's work), the sum of transfer durations and the share
of the workers' wall time spent in neither (scheduler latency, waiting on the GPU, idle).

Records (JSON, ``--json``): impl ("polygemm.dask" or "dask.array.matmul"), gpus, m, n, k,
dtype, seconds, tflops, plus chunk, inputs, cluster, the task-stream figures, the speed-up
over 1 GPU and a sampled correctness check against the float64 reference.

``--dry-run``: NumPy chunks, the cpu backend, the threaded scheduler (``--cpu-cluster``: a
``distributed.LocalCluster(processes=False)`` with one worker per "GPU") at a small size;
no GPU, CuPy or dask-cuda needed. It checks the tool, not the speed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

IMPLS = ("polygemm.dask", "dask.array.matmul")


# ---------------------------------------------------------------- work done on the workers

def _rand_block(block_info: Any = None, *, out_dtype: str, seed: int, lib: str) -> Any:
    """One input block of uniform values in [-1, 1), made where the task runs."""
    info = block_info[None]
    shape = tuple(info["chunk-shape"])
    loc = tuple(info["chunk-location"])
    s = (seed * 1_000_003 + loc[0] * 10_007 + loc[1]) % (2**31 - 1)
    if lib == "cupy":
        import cupy

        x = cupy.random.RandomState(s).random_sample(shape, dtype=cupy.float32)
    else:
        x = np.random.default_rng(s).random(shape, dtype=np.float32)
    return (x * 2 - 1).astype(out_dtype)


def _device_sync() -> None:
    """Wait for this worker's GPU (queued kernels included); nothing on a CPU worker."""
    if "cupy" in sys.modules:
        import cupy

        cupy.cuda.runtime.deviceSynchronize()


def _worker_info() -> dict:
    info = {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid()}
    try:
        import cupy

        dev = cupy.cuda.Device()
        info["gpu"] = cupy.cuda.runtime.getDeviceProperties(dev.id)["name"].decode()
        info["pci_bus_id"] = dev.pci_bus_id
    except Exception as exc:  # CPU workers (dry run)
        info["gpu"] = None
        info["note"] = f"{type(exc).__name__}: {exc}"[:200]
    return info


# ---------------------------------------------------------------- helpers

def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "get"):
        return x.get()
    return np.asarray(x)


def make_inputs(m: int, n: int, k: int, chunk: int, dtype: str, lib: str, seed: int = 1) -> tuple[Any, Any]:
    import dask.array as da
    from dask.array.core import normalize_chunks

    if lib == "cupy":
        import cupy

        meta = cupy.empty((0, 0), dtype=dtype)
    else:
        meta = np.empty((0, 0), dtype=dtype)
    kw = {"out_dtype": dtype, "lib": lib}
    A = da.map_blocks(_rand_block, chunks=normalize_chunks(chunk, (m, k)), dtype=dtype, meta=meta, seed=seed, name=f"bench-a-{seed}-{m}-{k}-{chunk}-{dtype}", **kw)
    B = da.map_blocks(_rand_block, chunks=normalize_chunks(chunk, (k, n)), dtype=dtype, meta=meta, seed=seed + 1, name=f"bench-b-{seed}-{k}-{n}-{chunk}-{dtype}", **kw)
    return A, B


def build(impl: str, A: Any, B: Any, device: str | None, variant: str) -> Any:
    if impl == "polygemm.dask":
        import polygemm.dask

        return polygemm.dask.gemm(A, B, device=device, variant=variant)
    import dask.array as da

    return da.matmul(A, B)


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -float("inf")
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def task_stream_summary(data: list[dict], wall: float, workers: int, name_prefix: str) -> dict:
    """Sum of task compute and transfer durations, and the workers' share of wall time in neither."""
    compute = transfer = 0.0
    product_compute = 0.0
    tasks = 0
    per_worker: dict[str, list[tuple[float, float]]] = {}
    for t in data:
        key = t.get("key")
        kname = key[0] if isinstance(key, tuple) else str(key)
        tasks += 1
        for ss in t.get("startstops", ()):
            d = float(ss["stop"]) - float(ss["start"])
            if ss["action"] == "compute":
                compute += d
                if kname.startswith(name_prefix):
                    product_compute += d
            elif ss["action"] == "transfer":
                transfer += d
            if ss["action"] in ("compute", "transfer"):
                per_worker.setdefault(t.get("worker", "?"), []).append((float(ss["start"]), float(ss["stop"])))
    busy = sum(_union(iv) for iv in per_worker.values())
    span = wall * max(workers, 1)
    return {
        "tasks": tasks,
        "task_seconds": compute,
        "product_task_seconds": product_compute,
        "transfer_seconds": transfer,
        "transfer_share": transfer / span if span else None,
        "other_share": max(0.0, 1.0 - busy / span) if span else None,
    }


def sampled_check(R: Any, A: Any, B: Any, samples: int, rng: np.random.Generator, scheduler: Any) -> str:
    """Compare two ``samples`` × ``samples`` windows of the result (a random one and the last
    corner) with the float64 reference of the rows of A and columns of B they need (slices
    only: no fancy indexing on CuPy blocks)."""
    from polygemm.testing import check_result

    m, n = R.shape
    sm, sn = min(samples, m), min(samples, n)
    windows = [(int(rng.integers(0, m - sm + 1)), int(rng.integers(0, n - sn + 1))), (m - sm, n - sn)]
    for r0, c0 in windows:
        got, a_s, b_s = (_to_numpy(x) for x in scheduler(R[r0:r0 + sm, c0:c0 + sn], A[r0:r0 + sm, :], B[:, c0:c0 + sn]))
        res = check_result(got, a_s, b_s, out_dtype=R.dtype)
        if not res.ok:
            return f"fail at rows {r0}+, columns {c0}+: {res.message}"
    return "ok"


# ---------------------------------------------------------------- clusters

def make_cluster(kind: str, gpus: int, devices: list[str], protocol: str | None) -> tuple[Any, str]:
    visible = ",".join(devices[:gpus])
    if kind in ("auto", "dask-cuda"):
        try:
            from dask_cuda import LocalCUDACluster  # type: ignore[import-not-found, unused-ignore]
        except Exception as exc:
            if kind == "dask-cuda":
                raise SystemExit(f"--cluster dask-cuda: dask_cuda does not import ({type(exc).__name__}: {exc})")
            print(f"dask_cuda does not import ({type(exc).__name__}: {exc}); using distributed Nannies with CUDA_VISIBLE_DEVICES", flush=True)
        else:
            kw: dict[str, Any] = {"CUDA_VISIBLE_DEVICES": visible, "n_workers": gpus, "threads_per_worker": 1, "dashboard_address": None}
            if protocol:
                kw["protocol"] = protocol
            try:
                return LocalCUDACluster(**kw), "dask_cuda.LocalCUDACluster"
            except Exception as exc:
                if kind == "dask-cuda":
                    raise
                print(f"LocalCUDACluster did not start ({type(exc).__name__}: {exc}); using distributed Nannies with CUDA_VISIBLE_DEVICES", flush=True)
    from distributed import Nanny, Scheduler, SpecCluster

    workers = {
        # memory_limit=0: no host-memory spilling (distributed would count CuPy blocks as host memory and spill them to disk)
        f"gpu{d}": {"cls": Nanny, "options": {"nthreads": 1, "memory_limit": 0, "env": {"CUDA_VISIBLE_DEVICES": d},
                                              **({"protocol": protocol} if protocol else {})}}
        for d in devices[:gpus]
    }
    sched = {"cls": Scheduler, "options": {"dashboard_address": None, **({"protocol": protocol} if protocol else {})}}
    return SpecCluster(scheduler=sched, workers=workers, name=f"polygemm-bench-{gpus}gpu"), "distributed.SpecCluster(Nanny per GPU)"


def make_cpu_cluster(gpus: int) -> tuple[Any, str]:
    from distributed import LocalCluster

    return LocalCluster(processes=False, n_workers=gpus, threads_per_worker=1, dashboard_address=None), "distributed.LocalCluster(processes=False)"


# ---------------------------------------------------------------- one GPU count

def bench_cluster(args: argparse.Namespace, gpus: int, lib: str, client: Any, cluster_name: str, device_desc: str) -> list[dict]:
    import dask
    from distributed import get_task_stream, wait
    from distributed.client import futures_of

    m, n, k = args.m, args.n, args.k
    flops = 2.0 * m * n * k
    A, B = make_inputs(m, n, k, args.chunk, args.dtype, lib)
    A, B = client.persist([A, B])
    wait([A, B])
    client.run(_device_sync)
    modes = ["persist"] if gpus == 1 else args.inputs
    records = []
    inputs = futures_of(A) + futures_of(B)
    for mode in modes:
        if mode == "replicate":
            client.replicate(inputs)  # every input block on every worker
            client.run(_device_sync)
        for impl in args.impl:
            R = build(impl, A, B, args.device, args.variant)
            prefix = R.name.rsplit("-", 1)[0]
            times, stats = [], []
            for rep in range(args.warmup + args.repeat):
                if mode == "persist" and gpus > 1:
                    # one copy of each input block again: the copies the last run fetched would
                    # spare this run its transfers
                    client.replicate(inputs, n=1)
                    client.run(_device_sync)
                with get_task_stream(client) as ts:
                    t0 = time.perf_counter()
                    X = client.persist(R)
                    wait(X)
                    client.run(_device_sync)
                    wall = time.perf_counter() - t0
                if rep >= args.warmup:
                    times.append(wall)
                    stats.append(task_stream_summary(ts.data, wall, gpus, prefix))
                if rep == args.warmup + args.repeat - 1 and args.check:
                    check = sampled_check(X, A, B, args.samples, np.random.default_rng(rep), lambda *xs: dask.compute(*xs))
                del X
            best = min(range(len(times)), key=times.__getitem__)
            rec = {
                "impl": impl, "gpus": gpus, "m": m, "n": n, "k": k, "dtype": args.dtype,
                "seconds": times[best], "tflops": flops / times[best] / 1e12,
                "seconds_median": statistics.median(times), "seconds_all": times,
                "chunk": args.chunk, "inputs": mode, "cluster": cluster_name, "protocol": args.protocol or "tcp",
                "device": device_desc, "polygemm_device": args.device, "variant": args.variant if impl == "polygemm.dask" else None,
                "scheduler": "threads" if client is None else "distributed",
                "graph_tasks": len(dict(R.__dask_graph__())) - A.npartitions - B.npartitions,
                **stats[best],
                "check": check if args.check else "skipped",
                "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            }
            records.append(rec)
            print(f"{gpus} GPU(s) {mode:9s} {impl:18s} {rec['seconds'] * 1e3:9.1f} ms  {rec['tflops']:8.1f} TFLOP/s  "
                  f"tasks {rec['tasks']:5d}  transfer {rec['transfer_share'] or 0:.1%}  other {rec['other_share'] or 0:.1%}  check {rec['check'][:60]}", flush=True)
            del R
    del A, B
    return records


def bench_threads(args: argparse.Namespace) -> list[dict]:
    """The dry run without a cluster: NumPy chunks, the threaded scheduler, no task stream."""
    import dask

    m, n, k = args.m, args.n, args.k
    flops = 2.0 * m * n * k
    A, B = make_inputs(m, n, k, args.chunk, args.dtype, "numpy")
    A, B = dask.persist(A, B, scheduler="threads")
    records = []
    for impl in args.impl:
        R = build(impl, A, B, args.device, args.variant)
        times = []
        for _ in range(args.warmup + args.repeat):
            t0 = time.perf_counter()
            (X,) = dask.persist(R, scheduler="threads")
            times.append(time.perf_counter() - t0)
        times = times[args.warmup:]
        check = sampled_check(X, A, B, args.samples, np.random.default_rng(0), lambda *xs: dask.compute(*xs, scheduler="threads")) if args.check else "skipped"
        rec = {
            "impl": impl, "gpus": 0, "m": m, "n": n, "k": k, "dtype": args.dtype,
            "seconds": min(times), "tflops": flops / min(times) / 1e12, "seconds_median": statistics.median(times), "seconds_all": times,
            "chunk": args.chunk, "inputs": "persist", "cluster": None, "scheduler": "threads", "device": "CPU (dry run)",
            "polygemm_device": args.device, "variant": args.variant if impl == "polygemm.dask" else None,
            "graph_tasks": len(dict(R.__dask_graph__())) - A.npartitions - B.npartitions, "check": check,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        records.append(rec)
        print(f"threads   {impl:18s} {rec['seconds'] * 1e3:9.1f} ms  graph tasks {rec['graph_tasks']}  check {check[:60]}", flush=True)
    return records


# ---------------------------------------------------------------- output

def add_speedups(records: list[dict]) -> None:
    one = {r["impl"]: r["seconds"] for r in records if r["gpus"] == 1}
    for r in records:
        base = one.get(r["impl"])
        r["speedup_vs_1gpu"] = base / r["seconds"] if base and r["gpus"] >= 1 else None
        other = [o for o in records if o["gpus"] == r["gpus"] and o.get("inputs") == r.get("inputs") and o["impl"] == "dask.array.matmul"]
        r["vs_dask_matmul"] = other[0]["seconds"] / r["seconds"] if other and r["impl"] == "polygemm.dask" else None


def markdown(records: list[dict], command: str) -> str:
    lines = [
        "# polygemm.dask.gemm vs dask.array.matmul",
        "",
        f"Command: `{command}`",
        "",
        "seconds: wall clock of one product (persist, wait, GPU synchronize), best of the repeats; "
        "task s: sum of task durations (host time of the tasks); transfer / other: share of the workers' "
        "wall time spent receiving data / in neither computing nor receiving (scheduler, GPU queue, idle).",
        "",
        "check: a sampled block of the result against the float64 reference under polygemm's error bound "
        "(dask.array.matmul sums float16 partial blocks, which that bound can refuse: informational).",
        "",
        "| impl | GPUs | inputs | m×n×k | dtype | chunk | seconds | TFLOP/s | vs 1 GPU | vs dask.array.matmul | graph tasks | task s | transfer | other | check |",
        "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]

    def f(x: Any, fmt: str) -> str:
        return "—" if x is None else format(x, fmt)

    for r in records:
        lines.append(
            f"| {r['impl']} | {r['gpus']} | {r.get('inputs', '')} | {r['m']}×{r['n']}×{r['k']} | {r['dtype']} | {r.get('chunk')} | "
            f"{r['seconds']:.4f} | {r['tflops']:.4g} | {f(r.get('speedup_vs_1gpu'), '.2f')} | {f(r.get('vs_dask_matmul'), '.2f')} | "
            f"{r.get('graph_tasks')} | {f(r.get('task_seconds'), '.3f')} | {f(r.get('transfer_share'), '.1%')} | {f(r.get('other_share'), '.1%')} | "
            f"{str(r.get('check', ''))[:60]} |"
        )
    devs = sorted({str(r.get("device")) for r in records})
    lines += ["", f"Devices: {'; '.join(devs)}. Cluster: {', '.join(sorted({str(r.get('cluster')) for r in records}))}.", ""]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=None, help="m = n = k (default 32768; 384 with --dry-run)")
    p.add_argument("--m", type=int, default=None)
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--k", type=int, default=None)
    p.add_argument("--chunk", type=int, default=None, help="square chunk edge of A and B (default 8192; 160 with --dry-run: uneven)")
    p.add_argument("--dtype", default="float16", choices=("float16", "float32", "float64"))
    p.add_argument("--gpus", default="1,2", help="GPU counts to run, one cluster each (default 1,2)")
    p.add_argument("--devices", default=None, help="GPU indices to use (default $CUDA_VISIBLE_DEVICES or 0..max-1)")
    p.add_argument("--impl", default=",".join(IMPLS), help=f"comma list of {IMPLS}")
    p.add_argument("--inputs", default="persist,replicate", help="input placement on 2+ GPUs: persist, replicate (comma list)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--device", default=None, help="polygemm device inside the tasks (default 'cuda'; 'cpu' with --dry-run)")
    p.add_argument("--variant", default="auto")
    p.add_argument("--cluster", default="auto", choices=("auto", "dask-cuda", "distributed"))
    p.add_argument("--protocol", default=None, help="distributed protocol (default tcp; ucx needs ucx-py)")
    p.add_argument("--samples", type=int, default=48, help="rows and columns of the sampled correctness check")
    p.add_argument("--no-check", dest="check", action="store_false")
    p.add_argument("--json", default=None, help="write the records here (e.g. h200x2_dask.json)")
    p.add_argument("--markdown", default=None, help="write the table here (default: the --json path with .md)")
    p.add_argument("--dry-run", action="store_true", help="NumPy chunks, cpu backend, threaded scheduler, small size: no GPU needed")
    p.add_argument("--cpu-cluster", action="store_true", help="with --dry-run: a LocalCluster(processes=False) per GPU count instead of threads "
                   "(--dry-run --cluster distributed: the Nanny-per-GPU processes instead)")
    args = p.parse_args(argv)
    size = args.size or (384 if args.dry_run else 32768)
    args.m, args.n, args.k = args.m or size, args.n or size, args.k or size
    args.chunk = args.chunk or (160 if args.dry_run else 8192)
    args.device = args.device or ("cpu" if args.dry_run else "cuda")
    args.impl = [s.strip() for s in args.impl.split(",") if s.strip()]
    args.inputs = [s.strip() for s in args.inputs.split(",") if s.strip()]
    args.gpus = [int(g) for g in args.gpus.split(",")]
    if args.dry_run and not args.cpu_cluster:
        args.repeat = min(args.repeat, 2)
    for impl in args.impl:
        if impl not in IMPLS:
            p.error(f"--impl {impl!r}: choose from {IMPLS}")
    for mode in args.inputs:
        if mode not in ("persist", "replicate"):
            p.error(f"--inputs {mode!r}: choose persist or replicate")
    if args.json and "dask" not in Path(args.json).name:
        p.error(f"--json {args.json!r}: the file name must contain 'dask' (e.g. h200x2_dask.json)")
    if args.markdown is None and args.json:
        args.markdown = str(Path(args.json).with_suffix(".md"))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python3 tools/bench_dask.py " + " ".join(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")  # cluster start/stop chatter off (workers too)
    # workers (spawned processes) import polygemm from this checkout
    os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    records: list[dict] = []
    if args.dry_run and args.cluster == "distributed":
        args.cpu_cluster = True
    if args.dry_run and not args.cpu_cluster:
        records = bench_threads(args)
    else:
        from distributed import Client

        if __name__ != "__main__":  # imported: ship this module's functions by value
            import cloudpickle  # type: ignore[import-untyped, unused-ignore]

            cloudpickle.register_pickle_by_value(sys.modules[__name__])
        if args.dry_run:
            lib, devices = "numpy", [str(i) for i in range(max(args.gpus))]
        else:
            lib = "cupy"
            if args.devices:
                devices = [d.strip() for d in args.devices.split(",")]
            elif os.environ.get("CUDA_VISIBLE_DEVICES"):
                devices = [d.strip() for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",")]
            else:
                import cupy

                devices = [str(i) for i in range(cupy.cuda.runtime.getDeviceCount())]
            if max(args.gpus) > len(devices):
                print(f"asked for {max(args.gpus)} GPUs, {len(devices)} visible ({devices})", file=sys.stderr)
                return 2
        for g in args.gpus:
            if args.dry_run and args.cluster != "distributed":
                cluster, cname = make_cpu_cluster(g)
            else:  # the GPU clusters; with --dry-run --cluster distributed: the Nanny-per-GPU fallback on CPU workers
                cluster, cname = make_cluster(args.cluster, g, devices, args.protocol)
            client = Client(cluster)
            try:
                infos = client.run(_worker_info)
                gpus_seen = sorted({str(i.get("gpu")) for i in infos.values()})
                print(f"{g} worker(s) on {cname}: " + "; ".join(f"{w}: CUDA_VISIBLE_DEVICES={i['CUDA_VISIBLE_DEVICES']} {i.get('gpu')}" for w, i in infos.items()), flush=True)
                desc = "CPU (dry run)" if args.dry_run else f"{g}× " + ", ".join(gpus_seen)
                records += bench_cluster(args, g, lib, client, cname, desc)
            finally:
                client.close()
                cluster.close()
    add_speedups(records)
    meta: dict[str, str | None] = {"python": platform.python_version(), "platform": platform.platform()}
    for mod in ("dask", "distributed", "dask_cuda", "cupy", "numpy"):
        try:
            meta[mod] = __import__(mod).__version__
        except Exception:
            meta[mod] = None
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"command": command, "versions": meta, "records": records}, indent=1) + "\n")
        print(f"wrote {args.json}")
    table = markdown(records, command)
    if args.markdown:
        Path(args.markdown).write_text(table)
        print(f"wrote {args.markdown}")
    else:
        print(table)
    bad = [r for r in records if r["impl"] == "polygemm.dask" and str(r.get("check", "ok")) not in ("ok", "skipped")]
    return 1 if bad else 0


if __name__ == "__main__":
    from polygemm.apps.tool import run_tool

    run_tool(main, "bench_dask.py")
