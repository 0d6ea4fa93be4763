"""Archiving finished games and importing them back, against a plain XRANGE dump and XADD restore.

On a redis-server of its own, `--games` finished games are played through the engine, as a server plays
them (four players, up to `--placements` placements decided by the real rules, each envelope signed, then
the end), and each one's stream is kept as it was. Then, alternately, `--runs` times each:

- ours: `orchestra archive --all-ended --out-dir DIR` (a child process, as an operator runs it: fence,
  export, fsync, read back, verify every signature and decide every event again, rename, delete), then
  `orchestra import DIR` (verify again, write each game whole with its credentials and command records,
  index it): their wall time, and their CPU time (which a busy machine disturbs less);
- the baseline: the same streams read with XRANGE (redis-py pipelines, 100 games a round trip), written
  one NDJSON file a game and deleted, then read back and written again with XADD (pipelines likewise):
  what Redis and the files cost, with no checking, no durability and no index.

After every pass back, every stream must hold exactly the bytes it held before. Reported: games/s each
way for both (medians of the runs), and the ratios ours / baseline.

    python -m bench archive [--quick] [--games 1000] [--placements 30] [--runs 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import cycle
from pathlib import Path
from typing import Any, cast

import redis

from bench.common import ROOT, RedisServer, ratio, say, write_result
from bench.load import checkpoint_counts
from domain import STANDARD, EndGame, PerformanceToken, Place, Rejected, RepairToken, legal_spaces
from domain.messages import Token
from server.engine.games import Games
from server.engine.signing import Signer
from server.ops.signing_keys import DEFAULT_NAME, write_key
from server.store.redis import RedisEventStore

# Games played at once while setting up, and games a baseline pipeline carries.
PLAY_AT_ONCE = 50
CHUNK = 100
_TOKENS: list[Token] = [
    *(PerformanceToken(era=era) for era in ("baroque", "classical", "romantic")),
    *(RepairToken(family=family) for family in ("strings", "winds", "percussion_keyboards")),
]

_Entries = list[tuple[bytes, dict[bytes, bytes]]]


def _events_key(game_id: str) -> str:
    return f"orchestra:{{{game_id}}}:events"


async def _play(url: str, signer: Signer, games: int, placements: int) -> list[str]:
    """Play `games` games to their end through the engine; their ids."""
    store = await RedisEventStore.from_url(url)
    service = Games(store, signer=signer, max_placements=placements + 10)
    moves = cycle((token, pick) for token in _TOKENS for pick in range(8))

    async def one(n: int) -> str:
        game_id = (await service.create([f"P{n}a", f"P{n}b", f"P{n}c", f"P{n}d"])).game_id
        for i in range(placements):
            token, pick = next(moves)
            spaces = legal_spaces(STANDARD, token)
            place = Place(seat=i % 4, id=f"c{i}", token=token, space=spaces[(pick + n) % len(spaces)])
            try:
                await service.handle(game_id, place)
            except Rejected:
                continue  # a space full for this token: the game goes on with the next one
        await service.handle(game_id, EndGame(seat=0, id="end"))
        return game_id

    try:
        made: list[str] = []
        for start in range(0, games, PLAY_AT_ONCE):
            made += await asyncio.gather(*(one(n) for n in range(start, min(games, start + PLAY_AT_ONCE))))
        return made
    finally:
        await store.close()


def _streams(client: redis.Redis, ids: list[str]) -> dict[str, list[bytes]]:
    """Every game's stored envelopes, read with pipelined XRANGEs."""
    found: dict[str, list[bytes]] = {}
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        pipe = client.pipeline(transaction=False)
        for game_id in chunk:
            pipe.xrange(_events_key(game_id))
        for game_id, entries in zip(chunk, pipe.execute(), strict=True):
            found[game_id] = [fields[b"e"] for _, fields in cast(_Entries, entries)]
    return found


def _cli(*args: str) -> tuple[float, float]:
    """Run `orchestra ARGS` as a child; its wall and CPU seconds. Raises RuntimeError when it fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "server.ops.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(
            f"orchestra {args[0]} exited {done.returncode}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return seconds, _children_cpu() - cpu


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _ours(url: str, data_dir: Path, folder: Path) -> dict[str, float]:
    options = ("--redis-url", url, "--data-dir", str(data_dir))
    out, out_cpu = _cli("archive", "--all-ended", "--out-dir", str(folder), *options)
    back, back_cpu = _cli("import", str(folder), *options)
    return {"archive_s": out, "archive_cpu_s": out_cpu, "import_s": back, "import_cpu_s": back_cpu}


def _baseline(client: redis.Redis, ids: list[str], folder: Path) -> tuple[float, float]:
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        pipe = client.pipeline(transaction=False)
        for game_id in chunk:
            pipe.xrange(_events_key(game_id))
        for game_id, entries in zip(chunk, pipe.execute(), strict=True):
            data = b"".join(fields[b"e"] + b"\n" for _, fields in cast(_Entries, entries))
            (folder / f"{game_id}.ndjson").write_bytes(data)
        pipe = client.pipeline(transaction=False)
        for game_id in chunk:
            pipe.delete(_events_key(game_id))
        pipe.execute()
    out = time.perf_counter() - started
    started = time.perf_counter()
    for start in range(0, len(ids), CHUNK):
        pipe = client.pipeline(transaction=False)
        for game_id in ids[start : start + CHUNK]:
            lines = (folder / f"{game_id}.ndjson").read_bytes().splitlines()
            for version, line in enumerate(lines, start=1):
                pipe.xadd(_events_key(game_id), {"e": line}, id=f"0-{version}")
        pipe.execute()
    back = time.perf_counter() - started
    return out, back


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-archive-"))
    signer = Signer.generate()
    data_dir = work / "var"
    data_dir.mkdir()
    write_key(data_dir / DEFAULT_NAME, signer)  # the archive signs its trailers and verifies with it
    try:
        with RedisServer() as server:
            started = time.perf_counter()
            ids = await _play(server.url, signer, args.games, args.placements)
            signed = checkpoint_counts(server.url, ids)
            say(
                f"{len(ids)} games played in {time.perf_counter() - started:.1f} s, "
                f"{signed['envelopes_per_checkpoint']:.1f} envelopes a checkpoint"
            )
            client = redis.Redis.from_url(server.url)
            try:
                before = _streams(client, ids)
                envelopes = sum(len(lines) for lines in before.values())
                runs: dict[str, list[dict[str, Any]]] = {"ours": [], "baseline": []}
                for run in range(args.runs):
                    folder = work / f"ours-{run}"
                    timed = _ours(server.url, data_dir, folder)
                    identical = _streams(client, ids) == before
                    runs["ours"].append({**timed, "identical": identical})
                    say(
                        f"ours: archived in {timed['archive_s']:.2f} s ({timed['archive_cpu_s']:.2f} s CPU), "
                        f"imported in {timed['import_s']:.2f} s ({timed['import_cpu_s']:.2f} s CPU) "
                        f"(same bytes: {identical})"
                    )
                    shutil.rmtree(folder)
                    folder = work / f"baseline-{run}"
                    out, back = _baseline(client, ids, folder)
                    identical = _streams(client, ids) == before
                    runs["baseline"].append({"dump_s": out, "restore_s": back, "identical": identical})
                    say(
                        f"baseline: dumped in {out:.2f} s, restored in {back:.2f} s (same bytes: {identical})"
                    )
                    shutil.rmtree(folder)
            finally:
                client.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "config": {
            "games": len(ids),
            "placements": args.placements,
            "runs": args.runs,
            "envelopes": envelopes,
            "checkpoints": signed,
        },
        "runs": runs,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="a small run for CI")
    parser.add_argument("--games", type=int, default=None, help="finished games (default 1000)")
    parser.add_argument("--placements", type=int, default=None, help="placements tried a game (default 30)")
    parser.add_argument("--runs", type=int, default=None, help="runs of each, alternately (default 2)")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    args.games = args.games or (30 if args.quick else 1_000)
    args.placements = args.placements if args.placements is not None else (8 if args.quick else 30)
    args.runs = args.runs or (1 if args.quick else 2)
    result = asyncio.run(_main(args))
    games = result["config"]["games"]
    ours, baseline = result["runs"]["ours"], result["runs"]["baseline"]
    archive_s = _median([run["archive_s"] for run in ours])
    import_s = _median([run["import_s"] for run in ours])
    dump_s = _median([run["dump_s"] for run in baseline])
    restore_s = _median([run["restore_s"] for run in baseline])
    summary = {
        "games": games,
        "envelopes_per_game": result["config"]["envelopes"] / games if games else 0.0,
        "envelopes_per_checkpoint": result["config"]["checkpoints"]["envelopes_per_checkpoint"],
        "ours_archive_games_per_s": ratio(games, archive_s),
        "ours_import_games_per_s": ratio(games, import_s),
        "ours_archive_cpu_ms_per_game": 1000 * ratio(_median([r["archive_cpu_s"] for r in ours]), games),
        "ours_import_cpu_ms_per_game": 1000 * ratio(_median([r["import_cpu_s"] for r in ours]), games),
        "baseline_dump_games_per_s": ratio(games, dump_s),
        "baseline_restore_games_per_s": ratio(games, restore_s),
        "ratio_archive_to_dump": ratio(dump_s, archive_s),
        "ratio_import_to_restore": ratio(restore_s, import_s),
        "identical": all(run["identical"] for run in ours + baseline),
    }
    write_result("archive", {"quick": args.quick, "summary": summary, **result}, argv)
    print(
        f"{games} games of {summary['envelopes_per_game']:.0f} envelopes: "
        f"archive {summary['ours_archive_games_per_s']:.0f} games/s "
        f"(a plain dump {summary['baseline_dump_games_per_s']:.0f}, "
        f"ratio {summary['ratio_archive_to_dump']:.3f}); "
        f"import {summary['ours_import_games_per_s']:.0f} games/s "
        f"(a plain restore {summary['baseline_restore_games_per_s']:.0f}, "
        f"ratio {summary['ratio_import_to_restore']:.3f}); same bytes back: {summary['identical']}"
    )
    return 0 if summary["identical"] else 1
