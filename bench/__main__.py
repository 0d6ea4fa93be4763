"""`python -m bench <name>`: the load generator and the benchmarks of docs/performance.md.

    python -m bench load [--quick]            the table workload: ours vs the minimal pipeline, interference
    python -m bench throughput [--quick]      ours vs the minimal pipeline, closed loop
    python -m bench latency [--quick]         open loop at half the minimal pipeline's max rate
    python -m bench fanout [--writer]         one event to 1,000 spectators vs websockets broadcast() (and
                                              ours without the direct frame writer)
    python -m bench replay [--quick]          folding stored games vs decoding them; rebuilding from Redis
    python -m bench memory [--quick]          per idle spectator, per active game, steady load
    python -m bench scaling [--quick]         1..1,000 games; decide time in a long game
    python -m bench store [--quick]           our Redis store vs eventsourcing's recorders, 3 runs
    python -m bench profile [--quick]         py-spy on our server under the throughput load
    python -m bench pipeline [--quick]        the command path's CPU without sockets
    python -m bench instructions [--quick]    the table workload in instructions (callgrind), ours vs minimal
    python -m bench writer [--quick]          the table workload with and without the direct frame writer
    python -m bench signing [--quick]         the minimal pipeline plain, with padded, with signed envelopes
    python -m bench restart [--quick]         2,000 hellos at once; 2,000 clients back after a SIGTERM restart
    python -m bench slowloris [--quick]       10,000 stalled requests from one address; /healthz from another
    python -m bench pipelining [--quick]      200 connections x 5,000 pipelined GETs, never read; /metrics
    python -m bench gamelist [--quick]        GET /games with 5,000 private games vs none
    python -m bench wall [--quick]            the wall feed's bytes and a node's CPU per change
    python -m bench archive [--quick]         1,000 finished games archived and imported back vs a plain dump
    python -m bench records [--quick]         the club records' projector: games/s from a cold start over
                                              10,000 games; its lag behind 12 tables playing
    python -m bench faults [--quick]          failovers (Cluster or Sentinel) and nodes killed on a schedule;
                                              every client's history judged by bench/history.py
    python -m bench plot [--quick]            docs/*.png from the results of load and scaling
    python -m bench generator --start ours --games 20 --players 3 --spectators 5 --duration 10
                                              the generic load generator the others drive

Each benchmark writes bench/results/<name>.json (git-ignored) with its raw numbers and ratios.
"""

from __future__ import annotations

import argparse
import importlib
import sys

BENCHMARKS = {
    "load": "bench.load",
    "throughput": "bench.throughput",
    "latency": "bench.latency",
    "fanout": "bench.fanout",
    "replay": "bench.replay",
    "memory": "bench.memory",
    "scaling": "bench.scaling",
    "store": "bench.peer",
    "profile": "bench.profile",
    "pipeline": "bench.pipeline",
    "instructions": "bench.instructions",
    "writer": "bench.writer",
    "signing": "bench.signing",
    "restart": "bench.restart",
    "slowloris": "bench.slowloris",
    "pipelining": "bench.pipelining",
    "gamelist": "bench.gamelist",
    "archive": "bench.archive",
    "wall": "bench.wall",
    "plot": "bench.plot",
    "generator": "bench.generator",
    "faults": "bench.faults",
    "records": "bench.records",
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="name", required=True)
    modules = {}
    for name, module_name in BENCHMARKS.items():
        module = importlib.import_module(module_name)
        modules[name] = module
        module.add_arguments(sub.add_parser(name, help=(module.__doc__ or "").splitlines()[0]))
    args = parser.parse_args(argv)
    result: int = modules[args.name].main(args, argv)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
