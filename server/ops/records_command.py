"""`orchestra records`: the records projector on the store of --redis-url or of the data dir."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from server.ops.embedded_redis import URL_NAME, EmbeddedRedisError
from server.ops.local_store import LocalStoreError, opened
from server.ops.progress import INTERRUPTED
from server.records.database import open_records
from server.records.runner import rebuild, run
from server.store import StoreError
from server.store.redis import SentinelUrlError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the `records` command."""
    records = sub.add_parser(
        "records",
        help="project every game's result into the records database (the club records' projector)",
        description="Follow every game's stream (and archived games' files) into the records database: "
        "SQLite in the data dir (records.sqlite3), or ORCHESTRA_RECORDS_URL / --records-url "
        "(postgresql://..., sqlite:///path). One projector writes at a time, held by a lease in Redis; "
        "start more for availability. With --once, stop when caught up.",
    )
    records.add_argument(
        "action",
        nargs="?",
        choices=("run", "rebuild"),
        default="run",
        help="run (the default): follow the games; rebuild: build the next version of the tables beside "
        "the live one, from the streams and the archives, and switch reads to it once caught up",
    )
    records.add_argument(
        "--redis-url",
        help="the Redis holding the games: redis://, unix://, a Cluster node, or redis+sentinel:// "
        "(default: ORCHESTRA_REDIS_URL, else the data dir's Redis)",
    )
    records.add_argument(
        "--data-dir", type=Path, help="the data dir (default: ORCHESTRA_DATA_DIR, else ./var)"
    )
    records.add_argument("--records-url", help="the records database (default: SQLite in the data dir)")
    records.add_argument("--archives", type=Path, metavar="DIR", help="a folder of archived games' files")
    records.add_argument("--interval", type=float, default=1.0, help="seconds between passes (default 1)")
    records.add_argument(
        "--lease-seconds",
        type=float,
        default=10.0,
        help="how long the lease outlives a projector that stopped answering (default 10)",
    )
    records.add_argument(
        "--port",
        type=int,
        metavar="PORT",
        help="serve GET /metrics (the lag), /readyz (200 once caught up) and /healthz on 127.0.0.1:PORT",
    )
    records.add_argument("--once", action="store_true", help="stop once caught up")
    records.set_defaults(run=main)


def main(args: argparse.Namespace) -> int:
    """Run the projector; its exit status."""
    # The servers' own settings, so that a projector beside them needs no options of its own.
    args.redis_url = args.redis_url or os.environ.get("ORCHESTRA_REDIS_URL") or None
    args.data_dir = args.data_dir or Path(os.environ.get("ORCHESTRA_DATA_DIR") or "var")
    url = args.records_url or os.environ.get("ORCHESTRA_RECORDS_URL")
    try:
        database = open_records(url, args.data_dir)
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"orchestra: {exc}", file=sys.stderr)
        return 2

    async def project() -> int:
        async with opened(args.redis_url, args.data_dir) as local:
            if args.action == "rebuild":
                return await rebuild(
                    local.lease,
                    lambda: args.redis_url or (args.data_dir / URL_NAME).read_text().strip(),
                    lambda version: open_records(url, args.data_dir, version),
                    archives=args.archives,
                    ttl=args.lease_seconds,
                    say=lambda text: print(f"orchestra: {text}", file=sys.stderr, flush=True),
                )
            return await run(
                local.lease,
                lambda: args.redis_url or (args.data_dir / URL_NAME).read_text().strip(),
                database,
                archives=args.archives,
                interval=args.interval,
                once=args.once,
                ttl=args.lease_seconds,
                port=args.port,
                say=lambda text: print(f"orchestra: {text}", file=sys.stderr, flush=True),
            )

    try:
        return asyncio.run(project())
    except SentinelUrlError as exc:
        print(f"orchestra: {exc}", file=sys.stderr)
        return 2
    except (LocalStoreError, StoreError, EmbeddedRedisError) as exc:
        print(f"orchestra: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, asyncio.CancelledError):
        return INTERRUPTED
    finally:
        database.close()
