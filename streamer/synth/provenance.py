"""Realistic Chimbuko provenance records (seed 004's schema) for tests, benchmarks and examples.

`generate(...)` returns every collection of one run: function executions of
several ranks over several io steps (anomalies with call stacks, counters,
an event window with MPI communications, node state, GPU kernels with their
CPU parent), the metadata of each rank and GPU context, and the global
database (function and counter statistics, the AD model). Everything is
derived from a seed, so the same arguments give byte-identical records.
`write_collections` writes them as the provenance DB's export tools do: one
file per collection named after it, as JSON lines, a JSON array, or
pretty-printed JSON documents.

    python -m streamer.synth.provenance OUT_DIR --ranks 4 --steps 10
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path
from typing import Any, Iterator

import orjson

FUNCTIONS = [
    "main", "MPI_Init", "timestep", "compute_forces", "exchange_halo", "MPI_Isend", "MPI_Irecv",
    "MPI_Waitall", "MPI_Allreduce", "adios2_write", "cudaLaunchKernel", "update_positions_kernel",
]
GPU_KERNEL = "update_positions_kernel"
COUNTERS = ["PAPI_TOT_CYC", "PAPI_L2_TCM", "Message size sent to all nodes", "Bytes Written"]
NODE_FIELDS = ["Memory Available (MB)", "CPU Usage (%)", "Memory Footprint (VmRSS) (KB)"]
START_US = 1_700_000_000_000_000
"""Run start, in microseconds since the epoch (TAU's clock)."""
STEP_US = 1_000_000


def _run_stats(rng: random.Random, mean: float, spread: float, count: int, *, accumulate: bool = True) -> dict:
    return {
        "accumulate": round(mean * count, 3) if accumulate else None,
        "count": count,
        "kurtosis": round(rng.uniform(-1.0, 6.0), 6),
        "maximum": round(mean + 3 * spread, 3),
        "mean": round(mean, 3),
        "minimum": round(max(0.0, mean - 2 * spread), 3),
        "skewness": round(rng.uniform(-0.5, 3.0), 6),
        "stddev": round(spread, 3),
    }


def _algo_params(rng: random.Random, algorithm: str, mean: float) -> dict:
    if algorithm == "sstd":
        return _run_stats(rng, mean, mean * 0.1, rng.randint(100, 10_000))
    edges = [round(mean * (0.5 + i * 0.1), 3) for i in range(11)]
    return {"histogram": {"Histogram Bin Counts": [rng.randint(0, 500) for _ in range(10)],
                          "Histogram Bin Edges": edges},
            "internal_global_threshold": round(rng.uniform(5.0, 20.0), 4)}


class _Run:
    def __init__(self, *, ranks: int, steps: int, seed: int, algorithm: str, gpu: bool) -> None:
        self.rng = random.Random(seed)
        self.ranks, self.steps, self.algorithm, self.gpu = ranks, steps, algorithm, gpu
        self.fids = {name: fid for fid, name in enumerate(FUNCTIONS)}
        self.means = {name: 50.0 * (1 + fid) ** 1.5 for name, fid in self.fids.items()}
        self.next_sonata = {"anomalies": 0, "normalexecs": 0}
        self.idx: dict[tuple[int, int], int] = {}

    def label(self, rank: int, step: int) -> str:
        key = (rank, step)
        self.idx[key] = self.idx.get(key, -1) + 1
        return f"{rank}:{step}:{self.idx[key]}"

    def frame(self, func: str, label: str, entry: int, runtime: int, *, anomaly: bool | None,
              parent: str | None = None) -> dict:
        out = {"entry": entry, "exit": entry + runtime, "fid": self.fids[func], "func": func, "event_id": label}
        if anomaly is not None:
            out["is_anomaly"] = anomaly
        if parent is not None:
            out["parent_event_id"] = parent
        return out

    def execution(self, rank: int, step: int, *, anomaly: bool, collection: str) -> dict:
        rng = self.rng
        gpu = self.gpu and rng.random() < 0.2
        func = GPU_KERNEL if gpu else rng.choice(FUNCTIONS[2:10])
        mean = self.means[func]
        runtime = int(mean * (rng.uniform(4.0, 12.0) if anomaly else rng.uniform(0.7, 1.3)))
        exclusive = int(runtime * rng.uniform(0.3, 0.9))
        step_start = START_US + step * STEP_US
        entry = step_start + rng.randint(0, STEP_US // 2)
        label = self.label(rank, step)
        tid = 16 + rank % 4 if gpu else 0
        parents = ["timestep", "main"]
        stack = [self.frame(func, label, entry, runtime, anomaly=anomaly)]
        parent_labels = []
        for depth, name in enumerate(parents, 1):
            parent_label = self.label(rank, step)
            parent_labels.append(parent_label)
            stack.append(self.frame(name, parent_label, entry - 10 * depth, runtime + 20 * depth, anomaly=False))
        record: dict[str, Any] = {
            "__id": self.next_sonata[collection],
            "version": 3,
            "call_stack": stack,
            "counter_events": [
                {"counter_idx": i, "counter_name": name, "counter_value": rng.randint(0, 10**9),
                 "pid": 0, "rid": rank, "tid": tid, "ts": entry + rng.randint(0, max(runtime, 1))}
                for i, name in enumerate(rng.sample(COUNTERS, rng.randint(0, 3)))
            ],
            "entry": entry,
            "exit": entry + runtime,
            "event_id": label,
            "fid": self.fids[func],
            "func": func,
            "algo_params": _algo_params(rng, self.algorithm, mean),
            "is_gpu_event": gpu,
            "gpu_location": ({"context": 1, "device": rank % 4, "stream": rng.randint(0, 7), "thread": tid}
                             if gpu else None),
            "gpu_parent": ({"event_id": parent_labels[0], "tid": 0,
                            "call_stack": [self.frame("cudaLaunchKernel", parent_labels[0], entry - 5, 12,
                                                      anomaly=None)]} if gpu else None),
            "pid": 0,
            "rid": rank,
            "tid": tid,
            "hostname": f"node{rank // 2:03d}",
            "runtime_exclusive": exclusive,
            "runtime_total": runtime,
            "io_step": step,
            "io_step_tstart": step_start,
            "io_step_tend": step_start + STEP_US,
            "outlier_score": round(rng.uniform(12.0, 60.0) if anomaly else rng.uniform(0.0, 4.0), 6),
            "outlier_severity": runtime if anomaly else 0,
        }
        if anomaly:
            record["event_window"] = {
                "exec_window": [self.frame(rng.choice(FUNCTIONS[2:10]), self.label(rank, step),
                                           entry - 500 + 100 * i, rng.randint(10, 90), anomaly=False,
                                           parent=parent_labels[0]) for i in range(rng.randint(1, 4))],
                "comm_window": [
                    {"type": kind, "pid": 0, "rid": rank, "tid": 0,
                     "src": rank if kind == "SEND" else (rank + 1) % self.ranks,
                     "tar": (rank + 1) % self.ranks if kind == "SEND" else rank,
                     "bytes": rng.choice([8, 1024, 65536]), "tag": rng.randint(0, 99),
                     "timestamp": entry + rng.randint(0, max(runtime, 1)), "execdata_key": parent_labels[0]}
                    for kind in rng.sample(["SEND", "RECV"], rng.randint(0, 2))
                ],
            }
            record["node_state"] = {"data": [{"field": name, "value": round(rng.uniform(0, 64000), 2)}
                                             for name in NODE_FIELDS], "timestamp": step_start}
        else:
            record["event_window"] = None
            record["node_state"] = None
        self.next_sonata[collection] += 1
        return record


def iter_executions(count: int, *, ranks: int = 8, seed: int = 7, anomaly_rate: float = 0.1,
                    algorithm: str = "hbos", gpu: bool = True) -> Iterator[tuple[str, dict]]:
    """`count` function executions as (collection, record), rank after rank, step after step."""
    run = _Run(ranks=ranks, steps=0, seed=seed, algorithm=algorithm, gpu=gpu)
    made = 0
    step = 0
    while made < count:
        for rank in range(ranks):
            if made >= count:
                break
            anomaly = run.rng.random() < anomaly_rate
            collection = "anomalies" if anomaly else "normalexecs"
            yield collection, run.execution(rank, step, anomaly=anomaly, collection=collection)
            made += 1
        step += 1


def generate(*, ranks: int = 4, steps: int = 5, per_step: int = 6, anomaly_rate: float = 0.25, seed: int = 1,
             algorithm: str = "hbos", gpu: bool = True) -> dict[str, list[dict]]:
    """Every collection of one synthetic run (collection -> records, in write order)."""
    run = _Run(ranks=ranks, steps=steps, seed=seed, algorithm=algorithm, gpu=gpu)
    rng = run.rng
    out: dict[str, list[dict]] = {name: [] for name in
                                  ("anomalies", "normalexecs", "metadata", "func_stats", "counter_stats", "ad_model")}
    meta_id = 0
    for rank in range(ranks):
        entries = [("Hostname", f"node{rank // 2:03d}", 0), ("CPU Cores", 32, 0), ("Memory Total (KB)", 263_000_000, 0)]
        if gpu:
            tid = 16 + rank % 4
            entries += [("GPU Context", 1, tid), ("GPU Device", rank % 4, tid), ("GPU Name", "NVIDIA A100", tid)]
        for descr, value, tid in entries:
            out["metadata"].append({"descr": descr, "pid": 0, "rid": rank, "tid": tid, "value": value,
                                    "__id": meta_id})
            meta_id += 1
    for step in range(steps):
        for rank in range(ranks):
            for _ in range(per_step):
                anomaly = rng.random() < anomaly_rate
                collection = "anomalies" if anomaly else "normalexecs"
                out[collection].append(run.execution(rank, step, anomaly=anomaly, collection=collection))
    for index, (func, fid) in enumerate(run.fids.items()):
        anomalies = [r for r in out["anomalies"] if r["fid"] == fid]
        calls = max(1, sum(1 for c in ("anomalies", "normalexecs") for r in out[c] if r["fid"] == fid))
        mean = run.means[func]
        metrics = None
        if anomalies:
            scores = [r["outlier_score"] for r in anomalies]
            metrics = {
                "anomaly_count": _run_stats(rng, len(anomalies) / steps, 1.0, steps),
                "first_io_step": min(r["io_step"] for r in anomalies),
                "last_io_step": max(r["io_step"] for r in anomalies),
                "max_timestamp": max(r["entry"] for r in anomalies),
                "min_timestamp": min(r["entry"] for r in anomalies),
                "score": _run_stats(rng, sum(scores) / len(scores), 5.0, len(scores)),
                "severity": _run_stats(rng, mean * 6, mean, len(anomalies)),
            }
        out["func_stats"].append({
            "__id": index, "app": 0, "fid": fid, "fname": func, "anomaly_metrics": metrics,
            "runtime_profile": {"exclusive_runtime": _run_stats(rng, mean * 0.6, mean * 0.1, calls),
                                "inclusive_runtime": _run_stats(rng, mean, mean * 0.15, calls)},
        })
        out["ad_model"].append({"__id": index, "pid": 0, "fid": fid, "func_name": func,
                                "model": _algo_params(rng, algorithm, mean)})
    for counter in COUNTERS:
        out["counter_stats"].append({"app": 0, "counter": counter,
                                     "stats": _run_stats(rng, math.exp(rng.uniform(3, 15)), 100.0,
                                                         rng.randint(10, 5000), accumulate=False)})
    return out


FORMATS = {"jsonl": ".jsonl", "array": ".json", "pretty": ".json"}


def dump_records(records: list[dict], fmt: str = "jsonl") -> bytes:
    """Records as one file's bytes: JSON lines, a JSON array, or indented documents one after another."""
    if fmt == "jsonl":
        return b"".join(orjson.dumps(r) + b"\n" for r in records)
    if fmt == "array":
        return orjson.dumps(records, option=orjson.OPT_INDENT_2) + b"\n"
    if fmt == "pretty":
        return b"".join(orjson.dumps(r, option=orjson.OPT_INDENT_2) + b"\n" for r in records)
    raise ValueError(f"unknown format {fmt!r} (use {', '.join(FORMATS)})")


def write_collections(directory: str | Path, collections: dict[str, list[dict]], *,
                      formats: dict[str, str] | None = None) -> dict[str, Path]:
    """One file per collection, named after it; `formats` maps a collection to jsonl/array/pretty."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for collection, records in collections.items():
        fmt = (formats or {}).get(collection, "jsonl")
        path = directory / f"{collection}{FORMATS[fmt]}"
        path.write_bytes(dump_records(records, fmt))
        paths[collection] = path
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamer.synth.provenance",
                                     description="Write a synthetic Chimbuko provenance database export "
                                                 "(anomalies.jsonl, normalexecs.jsonl, metadata.jsonl, "
                                                 "func_stats.json, counter_stats.jsonl, ad_model.json).")
    parser.add_argument("out", help="directory to write the collection files into")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--per-step", type=int, default=6, help="function executions per rank and io step")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--algorithm", choices=("hbos", "sstd"), default="hbos")
    args = parser.parse_args(argv)
    collections = generate(ranks=args.ranks, steps=args.steps, per_step=args.per_step, seed=args.seed,
                           algorithm=args.algorithm)
    paths = write_collections(args.out, collections, formats={"func_stats": "array", "ad_model": "pretty"})
    for collection, path in paths.items():
        print(f"{path}: {len(collections[collection])} records")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
