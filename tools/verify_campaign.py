#!/usr/bin/env python3
"""What verify= costs and what it catches, written to --out as a results file (docs/results/<gpu>-verify.json:
benchmark "verify", view "verify", its commands, and records; tools/results_page.py shows it):

* one record per timed product: ``{"m", "n", "k", "dtype", "us_per_call", "us_per_call_verified", "overhead", ...}``,
  polygemm.gemm without and with ``verify="raise"`` as a GPU user calls it (CuPy arrays and ``out=``, wall time per
  call over calls back to back, operands drawn on the device; the backend's own arrays where CuPy is missing, on the
  cpu, or for bfloat16, which CuPy lacks), each the median of
  --repeats timings after a warm-up (--shapes, and --preset real for the
  real-workload preset, whose geometric mean of overheads is printed);
* one campaign record ``{"campaign": true, "injected", "detected", "clean", "false_alarms", ...}``: --clean correct
  products of random shapes, layouts, dtypes (drawn from a pool of --shape-pool of them) and scalings (float16 with K = 262144 and badly scaled inputs among
  them) checked with ``verify="raise"`` (a VerificationError is a false alarm), and --faults products with one
  element corrupted by more than its row's threshold (a value moved by 1.1x to 1000x the threshold, or a flipped
  bit that moves it more than the threshold), each of which must raise: the check is certain above 2x, and between
  1x and 2x misses only where the row's own rounding error, a few percent of the threshold, cancels the fault.
  Flipped bits that move an element less than the threshold are counted apart (``below_threshold``, ``below_threshold_detected``): the check promises nothing for them, nor for a
  NaN or infinity put in a row whose elements may rightly overflow the result's dtype (counted there too).

    python3 tools/verify_campaign.py --device cuda --out $OUT/h100-verify.json               # all of it
    python3 tools/verify_campaign.py --device cpu --out /tmp/v.json --shapes 64x64x64 --faults 50 --clean 50 --max-k 2048

Without --shapes the overhead shapes are 8192³ and 4096³ (fp16 and fp32, --dtypes); --no-overhead or
--no-campaign leaves a part out (--append adds to the records --out holds: the parts as two commands);
--time-limit stops the campaign early (the counts say how far it got).
Exit status 1: a false alarm, a miss of a fault past twice its row's threshold, or under 99.9% of the faults
detected.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import polygemm as pg  # noqa: E402
from polygemm.core.dtypes import dtype_named  # noqa: E402
from polygemm.testing import inject_fault  # noqa: E402
from polygemm.verification.host import may_overflow, row_thresholds  # noqa: E402

LONG_K = 262_144


def _shape(text: str) -> tuple[int, int, int, str]:
    """``MxNxK`` or ``MxNxK:LAYOUT`` (``polygemm bench``'s: nn, nt, tn, tt) as (m, n, k, layout)."""
    sizes, colon, layout = text.strip().lower().partition(":")
    m, n, k = (int(x) for x in sizes.split("x"))
    if colon and layout not in ("nn", "nt", "tn", "tt"):
        raise SystemExit(f"verify_campaign: --shapes {text!r}: the layout is nn, nt, tn or tt (A's letter, then B's)")
    return m, n, k, layout or "nn"


def _operand(rng: np.random.Generator, shape: tuple[int, int], dtype: np.dtype, col: bool, scale: Any = 1.0) -> np.ndarray:
    x = (rng.standard_normal(shape) * scale).astype(dtype)
    return np.asfortranarray(x) if col else x


class Runner:
    """The backend's arrays and timer: device arrays on a device backend, NumPy on the cpu."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.backend = pg.get_backend(device)
        self.host = tuple(getattr(self.backend, "residencies", ("host",))) == ("host",)
        self.timer = self.backend.timer()

    def device_name(self) -> str:
        """The device as results files name it (the GPU's own name on cuda)."""
        rt = getattr(self.backend, "runtime", None)
        return str(getattr(rt, "name", "") or self.backend.device_name() or self.device)

    def put(self, x: np.ndarray | None) -> Any:
        return x if x is None or self.host else self.backend.to_device(x)

    def get(self, x: Any) -> np.ndarray:
        return np.asarray(x) if self.host else self.backend.to_host(x)

    def gemm(self, a: Any, b: Any, c: Any = None, verify: str | None = None, **kw: Any) -> Any:
        return pg.gemm(a, b, c, device=self.device, verify=verify, **kw)

    def check_dtype(self, dtype: np.dtype) -> tuple[np.dtype, bool]:
        """The check's sums as the backend makes them: float32 compensated on the cuda device, float64 on the host."""
        on_device = getattr(self.backend, "verify_on_device", None)
        if not self.host and on_device is not None:
            return np.dtype(np.float32), True
        return np.dtype(np.float64), False


def _cupy() -> Any:
    """CuPy where it is installed (the device arrays a GPU user holds), else None."""
    try:
        import cupy
    except Exception:
        return None
    return cupy


def _wall(f: Any, sync: Any, calls: int) -> float:
    """Seconds per call of ``f`` over ``calls`` calls back to back, the device drained before and after."""
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        f()
    sync()
    return (time.perf_counter() - start) / calls


def overhead(run: Runner, shapes: list[tuple[int, int, int, str]], repeats: int, seed: int,
             time_limit: float = math.inf, layouts: list[str] | None = None) -> list[dict[str, Any]]:
    """The call with and without the check, as a GPU user makes it: CuPy arrays and ``out=`` (wall time per call,
    calls back to back) where CuPy is installed on a device backend and has the dtype; else the backend's own arrays,
    new results. ``layouts``: each product's operand layout (``polygemm bench``'s: ``t`` a transposed view of a
    row-major array; default ``nn``). No product is started past ``time_limit`` seconds (the records say how many
    were timed)."""
    rng = np.random.default_rng(seed)
    records = []
    cupy = None if run.host else _cupy()
    start = time.perf_counter()
    for index, (m, n, k, dname) in enumerate(shapes):
        layout = layouts[index] if layouts else "nn"
        if records and time.perf_counter() - start > time_limit:  # (one product at least: a limit of 0 times one)
            print(f"time limit: {len(records)} of {len(shapes)} products timed", flush=True)
            break
        dtype = dtype_named(dname)
        if cupy is not None and dtype.name in ("float16", "float32"):
            # drawn on the device: the preset's largest operands take the host's generator seconds each
            draw = cupy.random.RandomState(int(rng.integers(2**31))).standard_normal
            a = draw((k, m) if layout[0] == "t" else (m, k), dtype=cupy.float32).astype(dtype)
            b = draw((n, k) if layout[1] == "t" else (k, n), dtype=cupy.float32).astype(dtype)
            a, b = (a.T if layout[0] == "t" else a), (b.T if layout[1] == "t" else b)  # x @ W.T: nt
            out = cupy.empty((m, n), dtype)
            arrays = "cupy, out="
            plain = lambda: run.gemm(a, b, out=out)  # noqa: E731
            checked = lambda: run.gemm(a, b, out=out, verify="raise")  # noqa: E731
            sync = cupy.cuda.runtime.deviceSynchronize
            plain(), checked()  # builds, plans, caches (before the calls are counted)
            # about a tenth of a second of calls a timing, as many as the checked call's time allows (3 to 1000)
            calls = max(3, min(1000, int(0.1 / max(_wall(checked, sync, 3), 1e-6))))
            timer = lambda f: _wall(f, sync, calls)  # noqa: E731
        else:
            a, b = run.put(_operand(rng, (m, k), dtype, layout[0] == "t")), run.put(_operand(rng, (k, n), dtype, layout[1] == "t"))
            arrays = "the backend's, new result"
            plain = lambda: run.gemm(a, b)  # noqa: E731
            checked = lambda: run.gemm(a, b, verify="raise")  # noqa: E731
            timer = run.timer
            plain(), checked()  # builds, plans, caches
        t_plain, t_checked = [], []
        for _ in range(repeats):  # interleaved: drifts of clock and temperature fall on both alike
            t_plain.append(timer(plain))
            t_checked.append(timer(checked))
        us, us_v = statistics.median(t_plain) * 1e6, statistics.median(t_checked) * 1e6
        plan = pg.last_plan()
        rec = {"m": m, "n": n, "k": k, "layout": layout, "dtype": dname, "us_per_call": round(us, 3), "us_per_call_verified": round(us_v, 3),
               "overhead": round(us_v / us - 1.0, 4), "device": run.device, "variant": plan.variant if plan else "",
               "gpu": plan.device if plan else "", "arrays": arrays}
        records.append(rec)
        print(f"{m}x{n}x{k}{'' if layout == 'nn' else ':' + layout} {dname}: {us:.1f} us, verified {us_v:.1f} us "
              f"({100 * rec['overhead']:+.1f}%)", flush=True)
    return records


def _draw_shape(rng: np.random.Generator, dtypes: list[str], max_dim: int, max_k: int,
                long_k_share: float) -> tuple[str, int, int, int, bool, bool]:
    """A product the campaign checks: dtype, m, n, k (log-uniform; K = LONG_K for ``long_k_share`` of them, with M
    and N at most 32) and whether A and B are column-major."""
    dname = str(rng.choice(dtypes))
    long_k = rng.random() < long_k_share
    m, n = (int(x) for x in np.exp(rng.uniform(0, math.log(32 if long_k else max_dim), 2)).round())
    k = LONG_K if long_k else int(round(math.exp(rng.uniform(0, math.log(max_k)))))
    return dname, m, n, k, bool(rng.random() < 0.5), bool(rng.random() < 0.5)


def campaign(run: Runner, clean: int, faults: int, dtypes: list[str], max_dim: int, max_k: int, long_k_share: float,
             seed: int, time_limit: float, pool: int = 0) -> dict[str, Any]:
    """``pool`` > 0: the products' shapes, dtypes and layouts are drawn from ``pool`` of them, drawn once (fresh
    operands every trial): on a GPU a new shape may build kernels and always makes a plan, which a pool pays for
    once, so a campaign of 20,000 products fits minutes; 0: every trial draws its own."""
    rng = np.random.default_rng(seed)
    shapes = [_draw_shape(rng, dtypes, max_dim, max_k, long_k_share) for _ in range(pool)]
    if pool and long_k_share > 0 and not any(s[3] == LONG_K for s in shapes):  # long-K products stay among them
        shapes[0] = ("float16" if "float16" in dtypes else dtypes[0], 8, 8, LONG_K, False, True)
    counts = {"clean": 0, "false_alarms": 0, "injected": 0, "detected": 0, "missed_beyond_twice": 0, "below_threshold": 0,
              "below_threshold_detected": 0}
    alarms: list[str] = []
    missed: list[str] = []
    start = time.perf_counter()
    trial = 0
    while (counts["clean"] < clean or counts["injected"] < faults) and time.perf_counter() - start < time_limit:
        trial += 1
        dname, m, n, k, a_col, b_col = shapes[int(rng.integers(pool))] if pool else \
            _draw_shape(rng, dtypes, max_dim, max_k, long_k_share)
        dtype = dtype_named(dname)
        badly = rng.random() < 0.3
        ascale = np.logspace(-3, 3, m)[rng.permutation(m)][:, None] if badly else 10.0 ** rng.uniform(-2, 2)
        bscale = np.logspace(-3, 3, n)[rng.permutation(n)][None, :] if badly else 10.0 ** rng.uniform(-2, 2)
        if dname == "float16" and badly:  # within float16's range: the products' sums must not overflow it
            ascale, bscale = np.minimum(ascale, 4.0), np.minimum(bscale, 4.0)
        a = _operand(rng, (m, k), dtype, a_col, ascale)
        b = _operand(rng, (k, n), dtype, b_col, bscale)
        use_c = rng.random() < 0.3
        c = _operand(rng, (m, n), dtype, False) if use_c else None
        alpha, beta = (float(rng.choice([1.0, -0.75, 2.0])), float(rng.choice([1.0, 0.5, -1.0]))) if use_c else (1.0, 0.0)
        da, db, dc = run.put(a), run.put(b), run.put(c)
        what = f"{m}x{n}x{k} {dname}{' badly scaled' if badly else ''}{' with c' if use_c else ''}"
        if counts["clean"] < clean:
            try:
                run.gemm(da, db, dc, alpha=alpha, beta=beta, verify="raise")
            except pg.VerificationError as exc:
                counts["false_alarms"] += 1
                alarms.append(f"{what}: {exc}"[:400])
            counts["clean"] += 1
        if counts["injected"] >= faults:
            continue
        res = run.get(run.gemm(da, db, dc, alpha=alpha, beta=beta))
        chk, comp = run.check_dtype(dtype)
        i, j = int(rng.integers(m)), int(rng.integers(n))
        # a row's threshold depends on that row of a, c and the result (and all of b): the faulty row's alone is
        # worked out, so the host's float64 sums cost a matrix-vector product, not a product of the operands
        rows = (a[i:i + 1], c[i:i + 1] if c is not None else None)

        def threshold(row: np.ndarray) -> float:
            return float(row_thresholds(rows[0], b, rows[1], row, alpha, beta, dtype=dtype, out_dtype=res.dtype, check_dtype=chk,
                                        scalar_dtype=run.backend.scalar_dtype(dtype),
                                        compensated=comp)[0])

        thr_i = threshold(res[i:i + 1])
        old = float(res[i, j])
        if not (math.isfinite(old) and math.isfinite(thr_i)):
            continue
        if rng.random() < 0.5:
            bit = None
            target = old + float(rng.choice([-1.0, 1.0])) * thr_i * 10.0 ** rng.uniform(math.log10(1.1), 3.0)
            with np.errstate(over="ignore"):  # a value past the dtype's range stores as an infinity
                new = float(np.asarray(target).astype(res.dtype))  # as the element stores it
        else:
            bit = int(rng.integers(8 * res.dtype.itemsize))
            raw = res[i:i + 1, j:j + 1].copy()
            raw.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[res.dtype.itemsize])[...] ^= 1 << bit
            new = float(raw[0, 0])
        moved = abs(new - old) if math.isfinite(new) else math.inf
        # the threshold the check applies is that of the corrupted result (its row norm grows with the fault)
        bad = res[i:i + 1].copy()
        bad[0, j] = new
        limit = threshold(bad) if math.isfinite(new) else thr_i
        # a NaN or infinity in a row whose elements may rightly overflow is the product's own answer to the check
        invisible = not math.isfinite(new) and bool(may_overflow(rows[0], b, rows[1], alpha, beta, res.dtype)[0])
        above = moved > limit and not invisible
        fault = {"value": new} if bit is None else {"bit": bit}
        caught = False
        with inject_fault(i, j, **fault):  # type: ignore[arg-type]
            try:
                run.gemm(da, db, dc, alpha=alpha, beta=beta, verify="raise")
            except pg.VerificationError:
                caught = True
        if above:
            counts["injected"] += 1
            counts["detected"] += caught
            if not caught:
                missed.append(f"{what}: element ({i}, {j}) {old!r} -> {new!r}, {moved / limit:.3g}x its row's threshold")
                counts["missed_beyond_twice"] += moved > 2.0 * limit  # where the check is certain
        else:
            counts["below_threshold"] += 1
            counts["below_threshold_detected"] += caught
        if trial % 500 == 0:
            print(f"{trial} trials, {time.perf_counter() - start:.0f} s: {counts}", flush=True)
    rate = counts["detected"] / counts["injected"] if counts["injected"] else float("nan")
    return {"campaign": True, **counts, "detection_rate": rate, "device": run.device, "dtypes": dtypes, "max_dim": max_dim,
            "max_k": max_k, "long_k": LONG_K, "shape_pool": pool, "seconds": round(time.perf_counter() - start, 1), "seed": seed,
            "false_alarm_examples": alarms[:5], "missed_examples": missed[:5]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", help="backend to measure (cuda, cpu, ...)")
    p.add_argument("--out", required=True, type=Path, help="the JSON file written (a list of records)")
    p.add_argument("--shapes", default="8192x8192x8192,4096x4096x4096",
                   help="MxNxK[:LAYOUT],... timed without and with the check (LAYOUT: nn, nt, tn or tt, as polygemm bench takes it)")
    p.add_argument("--dtypes", default="float16,float32", help="dtypes of the timed shapes")
    p.add_argument("--preset", choices=["none", "real"], default="none", help="also time the real-workload preset (fp16)")
    p.add_argument("--repeats", type=int, default=20, help="timed calls of each kind per shape (the median is kept)")
    p.add_argument("--clean", type=int, default=10_000, help="correct products checked (false alarms counted)")
    p.add_argument("--faults", type=int, default=10_000, help="products with one element moved above the threshold")
    p.add_argument("--campaign-dtypes", default=None, help="dtypes of the campaign (default: float16,bfloat16,float32; "
                                                             "float64 too on the cpu)")
    p.add_argument("--max-dim", type=int, default=512, help="largest M and N of the campaign's products")
    p.add_argument("--max-k", type=int, default=4096, help="largest K of the campaign's products (besides the long-K ones)")
    p.add_argument("--long-k-share", type=float, default=0.01, help=f"share of the campaign's products with K = {LONG_K}")
    p.add_argument("--shape-pool", type=int, default=64,
                   help="draw the campaign's shapes, dtypes and layouts from this many, drawn once (fresh operands every "
                        "trial; a new shape costs a GPU a plan and maybe kernel builds); 0: a new one every trial")
    p.add_argument("--preset-time-limit", type=float, default=math.inf,
                   help="seconds the real preset's timings may take (no product is started past it; the summary says how many)")
    p.add_argument("--time-limit", type=float, default=480.0, help="seconds the campaign may take (it stops early, counting)")
    p.add_argument("--seed", type=int, default=None, help="seed of the random inputs (default: a fresh one)")
    p.add_argument("--no-overhead", action="store_true", help="leave out the timed shapes")
    p.add_argument("--no-campaign", action="store_true", help="leave out the fault campaign")
    p.add_argument("--append", action="store_true", help="add the records to those --out holds already (the two parts run "
                                                         "as two commands, each within a time limit)")
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else int(np.random.default_rng().integers(2**31))
    run = Runner(args.device)
    records: list[dict[str, Any]] = []
    if not args.no_overhead:
        dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
        given = [_shape(s) for s in args.shapes.split(",") if s.strip()]
        shapes = [(m, n, k, d) for m, n, k, _ in given for d in dtypes]
        records += overhead(run, shapes, args.repeats, seed, layouts=[lay for *_, lay in given for _ in dtypes])
        if args.preset == "real":
            from polygemm.apps.bench_layout import layout_of
            from polygemm.apps.bench_real import real_shapes

            shapes_real = real_shapes()
            preset = [(s[0], s[1], s[2], "float16") for s in shapes_real]
            real = overhead(run, preset, args.repeats, seed, args.preset_time_limit, [layout_of(s) for s in shapes_real])
            for rec in real:
                rec["preset"] = "real"
            geo = math.exp(statistics.fmean(math.log(r["us_per_call_verified"] / r["us_per_call"]) for r in real)) - 1.0
            print(f"real preset: geometric mean overhead {100 * geo:+.1f}% over {len(real)} shapes", flush=True)
            records += real + [{"preset": "real", "geomean_overhead": round(geo, 4), "shapes": len(real), "of": len(preset)}]
    if not args.no_campaign:
        host_dtypes = "float16,bfloat16,float32" + (",float64" if run.host else "")
        dtypes = [d.strip() for d in (args.campaign_dtypes or host_dtypes).split(",") if d.strip()]
        rec = campaign(run, args.clean, args.faults, dtypes, args.max_dim, args.max_k, args.long_k_share, seed, args.time_limit,
                       args.shape_pool)
        print(f"campaign: {rec['injected']} faults above the threshold, {rec['detected']} detected "
              f"({100 * rec['detection_rate']:.3f}%); {rec['clean']} clean products, {rec['false_alarms']} false alarms; "
              f"{rec['below_threshold']} flips below the threshold ({rec['below_threshold_detected']} detected anyway)", flush=True)
        records.append(rec)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = "python3 tools/verify_campaign.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    data = json.loads(args.out.read_text()) if args.append and args.out.exists() else {
        "benchmark": "verify", "title": 'verify="raise": the check\'s cost through the call, and a fault campaign',
        "gpu": run.device_name(), "date": datetime.date.today().isoformat(),
        "about": ("polygemm.gemm on CuPy arrays with out= without and with verify=\"raise\" (the median wall time per call of each, calls back to back, interleaved); "
                  "the campaign: correct products of random shapes, layouts, dtypes and scalings checked (a VerificationError is "
                  "a false alarm), and products with one element moved beyond its row's threshold (each must raise)."),
        "vendor": "none (no GEMM library checks its results)", "view": "verify", "commands": [], "command": command,
        "records": []}
    data["commands"].append(command)
    run_index = len(data["commands"]) - 1
    data["records"] += [{**rec, "run": run_index} for rec in records]
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {len(records)} records to {args.out}")
    # a failed run: a false alarm, a miss where the check is certain (a fault past twice the threshold), or a
    # detection rate under 99.9% (misses between one and two thresholds, where the row's own rounding error cancels
    # part of the fault, are allowed that rarely)
    return 0 if all(r.get("false_alarms", 0) == 0 and r.get("missed_beyond_twice", 0) == 0 and not r.get("detection_rate", 1.0) < 0.999
                    for r in records if r.get("campaign")) else 1


if __name__ == "__main__":
    from polygemm.apps.tool import run_tool

    run_tool(main, "verify_campaign.py")
