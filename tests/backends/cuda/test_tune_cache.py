"""The per-GPU tuning cache on the CPU: its keys, its file (atomic, tolerant of a corrupt or
foreign one), its bound, and one measurement per key across threads."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from polygemm.backends.cuda import tune_cache
from polygemm.backends.cuda.autotune import tune_key
from polygemm.backends.cuda.tune_cache import FORMAT, GpuId, Measurement, TuneCache, TuneKey
from polygemm.problem import normalize

H100 = GpuId("NVIDIA H100 80GB HBM3", (9, 0), 132)
H200 = GpuId("NVIDIA H200", (9, 0), 132)


def key(gpu: GpuId = H100, m: int = 512, **kw) -> TuneKey:
    fields = dict(dtype="float16", out_dtype="float16", n=256, k=1024, count=1, layouts="row,row,row", align="p32,p32,p32")
    fields.update(kw)
    return TuneKey(gpu, m=m, **fields)  # type: ignore[arg-type]


def meas(winner: str = "rung_a", us: float = 3.0, at: str = "2026-01-01T00:00:00+00:00") -> Measurement:
    return Measurement(winner, us, {winner: us, "rung_b": us * 2}, "rung_b", 4.0, at, "0.1.0")


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(tune_cache, "tune_dir", lambda: tmp_path)
    tune_cache.forget_caches()
    yield tmp_path
    tune_cache.forget_caches()


def test_a_measurement_applies_to_its_own_gpu_dtype_layouts_and_alignment_only(folder):
    cache = tune_cache.cache_for(H100)
    cache.put(key(), meas())
    assert cache.get(key()).winner == "rung_a"
    assert tune_cache.cache_for(H200).get(key(H200)) is None  # another GPU model: its own file, nothing in it
    assert cache.get(key(H200)) is None
    assert cache.get(key(GpuId(H100.name, (9, 0), 114))) is None  # the same model with other SMs (an MPS share)
    for other in (dict(dtype="bfloat16"), dict(out_dtype="float32"), dict(layouts="row,col,row"), dict(align="p32,p16,p32"),
                  dict(count=4), dict(m=513)):
        assert cache.get(key(**other)) is None, other
    with pytest.raises(ValueError, match="H200"):
        cache.put(key(H200), meas())
    assert {p.name for p in folder.iterdir()} == {f"{H100.slug}.json"}


def test_the_key_reads_the_operands_layout_and_alignment_off_the_problem():
    h = np.float16
    plain = tune_key(H100, normalize(np.zeros((512, 1000), h), np.zeros((1000, 256), h)))
    wt = tune_key(H100, normalize(np.zeros((512, 1000), h), np.zeros((256, 1000), h).T))  # x @ W.T
    odd = tune_key(H100, normalize(np.zeros((512, 1001), h), np.zeros((1001, 256), h)))
    pitch = tune_key(H100, normalize(np.zeros((512, 1000), h), np.zeros((1000, 264), h)[:, :256]))
    assert plain.layouts == "row,row,row" and wt.layouts == "row,col,row"
    assert plain.align == "p16,p32,p32"  # 2000-byte rows of A: 16-byte multiples, not 32
    assert odd.align.startswith("p2,")
    assert pitch == plain  # host operands are uploaded compact: a host view's row pitch is not what the kernel reads
    assert len({plain.text(), wt.text(), odd.text()}) == 3
    assert tune_key(H100, normalize(np.zeros((4, 64, 64), h), np.zeros((4, 64, 64), h))).count == 4


def test_entries_survive_the_process_in_an_atomically_written_file(folder, monkeypatch):
    cache = tune_cache.cache_for(H100)
    cache.put(key(), meas())
    path = folder / f"{H100.slug}.json"
    doc = json.loads(path.read_text())
    assert doc["format"] == FORMAT and doc["gpu"]["name"] == H100.name
    entry = doc["entries"][key().text()]
    assert entry["winner"] == "rung_a" and entry["timings"]["rung_b"] == 6.0 and entry["measured_at"] and entry["version"]
    tune_cache.forget_caches()
    assert tune_cache.cache_for(H100).get(key()).us == 3.0  # read back by the next process
    # a write that fails half way leaves the file as it was, and no temporary file behind
    before = path.read_text()

    def broken(*a, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tune_cache.os, "fsync", broken)  # the new file written, not yet in place
    with pytest.warns(RuntimeWarning, match="cannot be written"):
        tune_cache.cache_for(H100).put(key(m=64), meas())
    assert path.read_text() == before
    assert [p.name for p in folder.iterdir()] == [path.name]


def test_a_corrupt_file_is_ignored_with_a_warning_naming_it_and_rewritten(folder):
    path = folder / f"{H100.slug}.json"
    path.write_text('{"format": "polygemm-tune/1", "entries": {')  # cut short
    with pytest.warns(RuntimeWarning, match=rf"{path.name}.*not valid JSON"):
        cache = tune_cache.cache_for(H100)
    assert len(cache) == 0
    with pytest.warns(RuntimeWarning, match="not valid JSON"):  # read again before the write merges it
        cache.put(key(), meas())
    assert json.loads(path.read_text())["entries"][key().text()]["winner"] == "rung_a"


@pytest.mark.parametrize("doc", [{"format": "someone-else/3", "entries": {}}, [1, 2, 3],
                                 {"format": FORMAT, "gpu": {"name": "NVIDIA A100", "cc": [8, 0], "sms": 108}, "entries": {}}],
                         ids=["foreign", "not-an-object", "other-gpu"])
def test_a_foreign_file_is_ignored_and_left_as_it_is(folder, doc):
    path = folder / f"{H100.slug}.json"
    path.write_text(json.dumps(doc))
    with pytest.warns(RuntimeWarning, match=rf"{path.name}.*(not a polygemm-tune|another GPU)"):
        cache = tune_cache.cache_for(H100)
    cache.put(key(), meas())
    assert cache.get(key()).winner == "rung_a"  # kept for this process
    assert json.loads(path.read_text()) == doc


def test_an_entry_that_is_not_a_measurement_is_skipped(folder):
    path = folder / f"{H100.slug}.json"
    good = meas().record()
    path.write_text(json.dumps({"format": FORMAT, "gpu": H100.record(), "entries": {
        key().text(): good, key(m=1).text(): {"winner": "x"}, key(m=2).text(): {"winner": "x", "us": "fast"},
        key(m=3).text(): {"winner": "x", "us": -1.0}}}))
    cache = tune_cache.cache_for(H100)
    assert len(cache) == 1 and cache.get(key()).winner == "rung_a"


def test_the_cache_keeps_at_most_its_bound_dropping_the_oldest_measurements(folder):
    path = folder / "bounded.json"
    cache = TuneCache(H100, path, max_entries=3)
    for i in range(5):
        cache.put(key(m=100 + i), meas(at=f"2026-01-0{i + 1}T00:00:00+00:00"))
    assert len(cache) == 3
    assert cache.get(key(m=100)) is None and cache.get(key(m=101)) is None and cache.get(key(m=104)) is not None
    assert len(json.loads(path.read_text())["entries"]) == 3
    assert len(TuneCache(H100, path, max_entries=2)) == 2  # a smaller bound on load


def test_the_bound_comes_from_the_environment(folder, monkeypatch):
    monkeypatch.setenv("POLYGEMM_TUNE_CACHE_SIZE", "2")
    assert tune_cache.cache_for(H100).max_entries == 2
    tune_cache.forget_caches()
    monkeypatch.setenv("POLYGEMM_TUNE_CACHE_SIZE", "lots")
    with pytest.warns(RuntimeWarning, match="POLYGEMM_TUNE_CACHE_SIZE"):
        assert tune_cache.cache_for(H100).max_entries == tune_cache.DEFAULT_SIZE


def test_two_processes_writing_keep_each_others_entries(folder):
    path = folder / "shared.json"
    one, two = TuneCache(H100, path), TuneCache(H100, path)
    one.put(key(m=1), meas("from_one"))
    two.put(key(m=2), meas("from_two"))
    again = TuneCache(H100, path)
    assert again.get(key(m=1)).winner == "from_one" and again.get(key(m=2)).winner == "from_two"


def test_many_threads_missing_one_key_measure_it_once(folder):
    cache = tune_cache.cache_for(H100)
    calls = []
    gate = threading.Barrier(16)

    def measure():
        calls.append(threading.get_ident())
        time.sleep(0.05)
        return meas()

    results = []

    def worker(i: int) -> None:
        gate.wait()
        results.append(cache.measure_once(key(m=7 if i % 2 else 9), measure))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 2  # one measurement for each of the two keys
    assert len(results) == 16 and all(r is not None and r.winner == "rung_a" for r in results)


def test_a_failed_measurement_leaves_the_cache_as_it_was_and_frees_the_key(folder):
    cache = tune_cache.cache_for(H100)

    def boom():
        raise RuntimeError("launch failed")

    with pytest.raises(RuntimeError):
        cache.measure_once(key(), boom)
    assert cache.get(key()) is None
    assert cache.measure_once(key(), lambda: None) is None
    assert cache.measure_once(key(), meas).winner == "rung_a"
    assert cache.measure_once(key(), lambda: meas("again")).winner == "rung_a"  # held: not measured again
    assert cache.measure_once(key(), lambda: meas("again"), force=True).winner == "again"


def test_an_unusable_cache_folder_keeps_measurements_in_memory(tmp_path, monkeypatch):
    afile = tmp_path / "afile"
    afile.write_text("")
    monkeypatch.setenv("POLYGEMM_CACHE_DIR", str(afile))
    tune_cache.forget_caches()
    try:
        with pytest.warns(RuntimeWarning, match="in memory only"):
            cache = tune_cache.cache_for(H100)
        cache.put(key(), meas())
        assert cache.get(key()).winner == "rung_a" and cache.path is None
    finally:
        tune_cache.forget_caches()


def test_the_tune_folder_sits_beside_the_kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYGEMM_CACHE_DIR", str(tmp_path / "pg"))
    assert tune_cache.tune_dir() == tmp_path / "pg" / "tune"
    assert (tmp_path / "pg" / "tune").is_dir()


def _ship(folder, gpu: GpuId, entries: dict) -> None:
    folder.mkdir(exist_ok=True)
    doc = {"format": FORMAT, "gpu": gpu.record(), "entries": {k: m.record() for k, m in entries.items()}}
    (folder / f"{gpu.slug}.json").write_text(json.dumps(doc))


def test_shipped_measurements_apply_beneath_the_gpus_own_and_say_so(folder, tmp_path, monkeypatch):
    from polygemm.backends.cuda.autotune import measured_reason

    shipped = tmp_path / "shipped"
    _ship(shipped, H100, {key().text(): meas("rung_s", 5.0), key(m=640).text(): meas("rung_t", 6.0)})
    _ship(shipped, H200, {key(H200).text(): meas("rung_u", 7.0)})
    monkeypatch.setattr(tune_cache, "shipped_dir", lambda: shipped)
    tune_cache.forget_caches()
    cache = tune_cache.cache_for(H100)
    got = cache.get(key())
    assert got.winner == "rung_s" and got.shipped and "this GPU model" in measured_reason(got)
    assert cache.get(key(H200)) is None and cache.get(key(m=513)) is None  # another model's file; another key
    assert len(cache) == 0 and cache.entries() == {}  # the GPU's own measurements only
    cache.put(key(), meas("rung_mine", 4.0))  # a measurement on this GPU overrules the shipped one
    mine = cache.get(key())
    assert mine.winner == "rung_mine" and not mine.shipped and "measured on this GPU:" in measured_reason(mine)
    written = json.loads((folder / f"{H100.slug}.json").read_text())["entries"]
    assert list(written) == [key().text()] and "shipped" not in written[key().text()]  # none copied into the user's file
    # tune measures a product again whatever the shipped file holds
    calls = []
    assert cache.measure_once(key(m=640), lambda: calls.append(1) or meas("rung_new", 2.0)).winner == "rung_new" and calls


def test_a_shipped_file_of_another_format_or_gpu_is_passed_over(folder, tmp_path, monkeypatch):
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / f"{H100.slug}.json").write_text(json.dumps({"format": "other/1", "gpu": H100.record(), "entries": {}}))
    monkeypatch.setattr(tune_cache, "shipped_dir", lambda: shipped)
    tune_cache.forget_caches()
    assert tune_cache.cache_for(H100).get(key()) is None


def test_the_shipped_files_name_their_gpu_and_variants_the_catalog_has():
    from polygemm.backends.cuda.variants import kernel_specs

    files = sorted(tune_cache.shipped_dir().glob("*.json"))
    assert files, "polygemm ships the H100's measurements"
    specs = kernel_specs()
    for path in files:
        doc = json.loads(path.read_text())
        gpu = GpuId(doc["gpu"]["name"], tuple(doc["gpu"]["cc"]), doc["gpu"]["sms"])  # type: ignore[arg-type]
        assert doc["format"] == FORMAT and path.name == f"{gpu.slug}.json"
        for text, rec in doc["entries"].items():
            m = Measurement.from_record(rec)
            assert m is not None and m.winner in m.timings, text
            for name in m.timings:
                assert name.removesuffix(" on aligned copies").partition(":")[0] in specs, (text, name)


def _put_many(path: str, first: int, count: int, start) -> None:
    """One process's writer (a fork's target): ``count`` measurements of its own keys into the cache at ``path``."""
    from pathlib import Path

    cache = TuneCache(H100, Path(path))
    start.wait()
    for m in range(first, first + count):
        cache.put(key(m=m), meas())


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="fork starts the writers at once")
def test_writers_in_several_processes_keep_every_entry(tmp_path):
    """Each write merges what is on disk under a lock on the folder: four processes' measurements all stay."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    path = tmp_path / "cache.json"
    start = ctx.Barrier(4)
    procs = [ctx.Process(target=_put_many, args=(str(path), 1000 * i, 15, start)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    entries = json.loads(path.read_text())["entries"]
    assert len(entries) == 60
    assert [p.name for p in tmp_path.iterdir()] == ["cache.json"]  # the lock leaves nothing behind


@pytest.mark.parametrize("content", [b"\xff\xfe not text", b"[" * 100000 + b"]" * 100000,
                                     b'{"format": "%s", "gpu": %s, "entries": {"k": {"winner": "x", "us": 1%s}}}'],
                         ids=["not utf-8", "nested past the recursion limit", "a number past any float"])
def test_a_corrupt_cache_file_is_ignored_with_a_warning(tmp_path, content):
    path = tmp_path / "cache.json"
    if b"%s" in content:
        content = content % (FORMAT.encode(), json.dumps(H100.record()).encode(), b"0" * 400)
    path.write_bytes(content)
    with pytest.warns(RuntimeWarning) if b"entries" not in content else _no_warning():
        cache = TuneCache(H100, path)
    assert len(cache) == 0
    cache.put(key(), meas())  # measuring goes on: the file is rewritten (or left, when foreign) without raising
    assert cache.get(key()).winner == "rung_a"


def _no_warning():
    import contextlib
    import warnings

    @contextlib.contextmanager
    def held():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            yield
    return held()
