"""The `orchestra` command: serve, create games, export and replay them."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from server.config import Settings

DEFAULT_SERVER = "http://127.0.0.1:8000"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    result: int = args.run(args)
    return result


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orchestra",
        description="An event-sourced game server for the Orchestra of Luthier.",
    )
    sub = parser.add_subparsers(title="commands")

    serve = sub.add_parser(
        "serve",
        help="run the server",
        description="Run the game server. With no Redis URL it starts its own redis-server, durable in "
        "--data-dir. Every option can also be set as ORCHESTRA_<NAME> (for example ORCHESTRA_REDIS_URL).",
    )
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (default 8000; 0 picks a free one)")
    serve.add_argument("--redis-url", help="use this Redis (redis://, unix://) instead of the embedded one")
    serve.add_argument(
        "--data-dir", type=Path, help="where the embedded Redis keeps its files (default ./var)"
    )
    serve.set_defaults(run=_serve)

    demo = sub.add_parser(
        "demo",
        help="run a server with a game of three bots to watch",
        description="Start a server in this process, create a game for three bots (Ada, Ben, Cy), print "
        "its watch link, and let the bots play it at a human pace; then serve on until Ctrl-C.",
    )
    demo.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    demo.add_argument("--port", type=int, help="port to listen on (default 8000; 0 picks a free one)")
    demo.add_argument("--redis-url", help="use this Redis instead of the embedded one")
    demo.add_argument(
        "--data-dir", type=Path, help="where the embedded Redis keeps its files (default ./var)"
    )
    demo.add_argument(
        "--pace",
        type=float,
        nargs=2,
        default=(0.5, 1.5),
        metavar=("MIN", "MAX"),
        help="seconds a bot waits before each placement (default 0.5 1.5)",
    )
    demo.add_argument("--placements", type=int, default=12, help="placements per bot (default 12)")
    demo.add_argument("--seed", type=int, help="seed the bots' choices, for a repeatable game")
    demo.add_argument("--exit-when-done", action="store_true", help="stop once the game has ended")
    demo.set_defaults(run=_demo)

    new = sub.add_parser(
        "new-game",
        help="create a game on a running server",
        description="Create a game on a running server and print each seat's secret token and links. "
        "The tokens are shown only once.",
    )
    new.add_argument("names", nargs="+", metavar="NAME", help="the players, in seat order (1 to 4)")
    new.add_argument("--layout", default="standard", help="the board layout (default standard)")
    new.add_argument("--private", action="store_true", help="spectators need a watch token")
    new.add_argument("--api-key", help="the server's API key, if it requires one")
    _server_option(new)
    new.set_defaults(run=_new_game)

    export = sub.add_parser(
        "export",
        help="print a game's events as NDJSON",
        description="Print every envelope of a game, one JSON object per line, in version order.",
    )
    export.add_argument("game", help="the game id")
    export.add_argument("--token", help="a watch or seat token, for a private game")
    export.add_argument(
        "--trailer",
        action="store_true",
        help="end with a line the server signs stating the last version and its hash, so that `orchestra "
        "verify --file` can tell a complete copy from a cut one (tools that read every line as an "
        "envelope must skip it: its type is trailer)",
    )
    _server_option(export)
    export.set_defaults(run=_export)

    replay = sub.add_parser(
        "replay",
        help="print a game's view at a version",
        description="Print the view of a game as it was after event N (version 1 is its creation).",
    )
    replay.add_argument("game", help="the game id")
    replay.add_argument("--at", type=int, required=True, metavar="N", help="the version to show")
    replay.add_argument("--token", help="a watch or seat token, for a private game")
    _server_option(replay)
    replay.set_defaults(run=_replay)

    check = sub.add_parser(
        "verify",
        help="check a game's history",
        description="Check every envelope's signature, the hash chain and the versions, decide every event "
        "again with the rules, re-fold the stream and compare it with the server's live view and final "
        "scores. With --file, check an exported or archived NDJSON file offline instead. Exits 1 and names "
        "the first bad version when anything is wrong.",
    )
    check.add_argument("game", nargs="?", help="the game id (on the server; not with --file)")
    check.add_argument("--token", help="a watch or seat token, for a private game")
    check.add_argument("--file", type=Path, metavar="FILE", help="an exported or archived game to check")
    _key_options(check)
    check.add_argument(
        "--against",
        type=Path,
        metavar="EARLIER",
        help="an earlier export or archive of the game (a client's record will do): the history must still "
        "hold each of its envelopes, unchanged; finds envelopes dropped from the end since",
    )
    check.add_argument(
        "--open",
        action="store_true",
        help="with --file: accept a file that ends neither with the game's signed end nor with a trailer "
        "(an export of a game in progress made without one; its last envelopes cannot be proven there)",
    )
    _server_option(check)
    check.set_defaults(run=_verify)

    signing = sub.add_parser(
        "signing-key",
        help="print, rotate or make the key that signs envelopes",
        description="Print the id and public key of the signing key (ORCHESTRA_SIGNING_KEY, "
        "ORCHESTRA_SIGNING_KEY_FILE, or <data-dir>/signing.key) and of the retired ones. --rotate retires "
        "the key in the key file and writes a new one (restart the nodes to sign with it); --generate "
        "prints a new key for ORCHESTRA_SIGNING_KEY and changes nothing.",
    )
    signing.add_argument("--data-dir", type=Path, help="the server's data dir (default ./var)")
    signing.add_argument("--key-file", type=Path, help="the key file (default <data-dir>/signing.key)")
    action = signing.add_mutually_exclusive_group()
    action.add_argument("--rotate", action="store_true", help="retire the key file's key, write a new one")
    action.add_argument("--generate", action="store_true", help="print a new private key and its public key")
    signing.set_defaults(run=_signing_key)

    keep = sub.add_parser(
        "archive",
        help="export a finished game to NDJSON and delete it from Redis",
        description="Write a finished game's envelopes to FILE, read the file back and verify it, and only "
        "then delete the game's stream and keys from Redis. Works with the server running (give "
        "--redis-url, or the same --data-dir as the embedded server) or stopped.",
    )
    keep.add_argument("game", help="the game id")
    keep.add_argument("--out", type=Path, required=True, metavar="FILE", help="the NDJSON file to write")
    keep.add_argument("--redis-url", help="the Redis holding the game (default: the embedded one)")
    keep.add_argument("--data-dir", type=Path, default=Path("var"), help="the embedded Redis's data dir")
    keep.add_argument("--force", action="store_true", help="archive even a game that has not ended")
    _key_options(keep, data_dir=False)
    keep.set_defaults(run=_archive)
    return parser


def _key_options(parser: argparse.ArgumentParser, data_dir: bool = True) -> None:
    parser.add_argument(
        "--public-key",
        action="append",
        metavar="KEY",
        help="a trusted public key (base64, as GET /signing-keys lists it); repeat for several. Default: "
        "the server's GET /signing-keys online, else the keys of the local settings (ORCHESTRA_SIGNING_*, "
        "or --data-dir's signing.key and signing.key.retired)",
    )
    if data_dir:
        parser.add_argument("--data-dir", type=Path, help="where the local signing keys are (default ./var)")
    parser.add_argument(
        "--allow-unsigned",
        action="store_true",
        help="accept envelopes without a signature before the first signed one (games recorded before "
        "the server signed envelopes)",
    )


def _server_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server", default=DEFAULT_SERVER, help=f"the server's URL (default {DEFAULT_SERVER})"
    )


def _settings(args: argparse.Namespace) -> Settings | None:
    """The server's settings: ORCHESTRA_* variables, then the command's options; None (said) if invalid,
    or if the API key is one a server must not start with (server.auth.api_key_problem)."""
    from server.auth import api_key_problem
    from server.config import from_env
    from server.engine.signing import SigningKeyError
    from server.ops import signing_keys

    try:
        settings = from_env(
            host=args.host,
            port=args.port,
            redis_url=args.redis_url,
            data_dir=args.data_dir and str(args.data_dir),
        )
    except ValueError as exc:
        print(f"orchestra: {exc}", file=sys.stderr)
        return None
    problem = api_key_problem(settings.api_key)
    if problem is not None:
        print(f"orchestra: {problem}; the server was not started", file=sys.stderr)
        return None
    try:  # a key given that does not parse, or a named key file that is missing (one is made on start)
        signing_keys.load_signer(settings, create=False)
    except SigningKeyError as exc:
        print(f"orchestra: {exc}; the server was not started", file=sys.stderr)
        return None
    return settings


def _serve(args: argparse.Namespace) -> int:
    from server.ops import logs, runner

    settings = _settings(args)
    if settings is None:
        return 2
    logs.setup(settings.log_level)
    server = runner.uvicorn_server(settings)

    async def announce() -> None:
        url = await runner.started_url(server)
        if url is not None:
            print(f"Orchestra server running at {url}/", flush=True)

    async def run() -> None:
        watcher = asyncio.create_task(announce())
        try:
            await server.serve()
        finally:
            watcher.cancel()

    runner.run(run())
    return 0 if server.started else 1


def _demo(args: argparse.Namespace) -> int:
    from server.ops import logs, runner
    from server.ops.demo import DemoOptions, run_demo

    settings = _settings(args)
    if settings is None:
        return 2
    if args.placements < 1 or args.pace[0] < 0 or args.pace[1] < args.pace[0]:
        print("orchestra: --placements must be >= 1 and --pace MIN MAX with 0 <= MIN <= MAX", file=sys.stderr)
        return 2
    logs.setup(settings.log_level)
    options = DemoOptions(
        pace=(args.pace[0], args.pace[1]),
        placements=args.placements,
        seed=args.seed,
        exit_when_done=args.exit_when_done,
    )
    try:
        runner.run(run_demo(settings, options))
    except KeyboardInterrupt:
        return 0
    return 0


def _request(method: str, url: str, body: Any = None, token: str | None = None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("content-type", "application/json")
    if token:
        request.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except urllib.error.URLError as exc:
        raise SystemExit(f"orchestra: cannot reach {url}: {exc.reason}") from None


def _damaged(status: int, body: bytes) -> dict[str, Any] | None:
    """The body of a `damaged_game` answer (the server cannot read a stored envelope), else None."""
    if status != 500:
        return None
    try:
        detail = json.loads(body)
    except ValueError:
        return None
    return detail if isinstance(detail, dict) and detail.get("code") == "damaged_game" else None


def _fail(status: int, body: bytes) -> int:
    try:
        detail = json.loads(body)
        print(f"orchestra: {status} {detail.get('code')}: {detail.get('message')}", file=sys.stderr)
    except ValueError:
        print(f"orchestra: HTTP {status}", file=sys.stderr)
    return 1


def _new_game(args: argparse.Namespace) -> int:
    base = args.server.rstrip("/")
    body = {"players": args.names, "layout": args.layout, "spectators": "token" if args.private else "public"}
    status, answer = _request("POST", f"{base}/games", body, args.api_key)
    if status != 201:
        return _fail(status, answer)
    created = json.loads(answer)
    game = created["game_id"]
    print(f"game {game} created")
    print(f"  watch:  {base}/games/{game}/watch")
    print(f"  replay: {base}/games/{game}/replay")
    if created.get("watch_token"):
        print(f"  watch token (private game): {created['watch_token']}")
    for seat in created["seats"]:
        print(f"  seat {seat['seat']} {seat['name']}: token {seat['token']}")
        print(f"      play: {base}/games/{game}/play#token={seat['token']}")
    print("The tokens are shown only this once; keep them.")
    return 0


def _export(args: argparse.Namespace) -> int:
    query = "?trailer=true" if args.trailer else ""
    url = f"{args.server.rstrip('/')}/games/{args.game}/events{query}"
    status, answer = _request("GET", url, token=args.token)
    if status != 200:
        return _fail(status, answer)
    sys.stdout.buffer.write(answer)
    return 0


def _replay(args: argparse.Namespace) -> int:
    url = f"{args.server.rstrip('/')}/games/{args.game}?at={args.at}"
    status, answer = _request("GET", url, token=args.token)
    if status != 200:
        return _fail(status, answer)
    print(json.dumps(json.loads(answer), indent=2, ensure_ascii=False))
    return 0


def _verify(args: argparse.Namespace) -> int:
    import msgspec

    from projections import View
    from server.ops.verify import verify

    if (args.file is None) == (args.game is None):
        print("orchestra: give a game id (online) or --file FILE (offline), not both", file=sys.stderr)
        return 2
    if args.file is not None:
        keys = _local_keys(args)
        if keys is None:
            return 2
        lines = _read_lines(args.file)
        departed = _departed(str(args.file), lines, args, keys)
        if departed is not None:
            return departed
        report = verify(lines, keys=keys, allow_unsigned=args.allow_unsigned, complete=not args.open)
        return _print_report(str(args.file), report, live=False)
    base = f"{args.server.rstrip('/')}/games/{args.game}"
    if args.public_key:
        keys = _given_keys(args.public_key)
        if keys is None:
            return 2
    else:
        status, answer = _request("GET", f"{args.server.rstrip('/')}/signing-keys")
        if status != 200:
            return _fail(status, answer)
        keys = _given_keys([key["public_key"] for key in json.loads(answer)["keys"]])
        if keys is None:
            return 2
    status, answer = _request("GET", f"{base}/events?trailer=true", token=args.token)
    damaged = _damaged(status, answer)
    if damaged is not None:
        print(f"game {args.game}: INVALID at version {damaged['version']}: {damaged['message']}")
        return 1
    if status != 200:
        return _fail(status, answer)
    lines = answer.splitlines()
    departed = _departed(f"game {args.game}", lines, args, keys)
    if departed is not None:
        return departed
    status, live = _request("GET", base, token=args.token)
    if status != 200:
        return _fail(status, live)
    report = verify(
        lines,
        msgspec.json.decode(live, type=View),
        keys=keys,
        game_id=args.game,
        allow_unsigned=args.allow_unsigned,
    )
    return _print_report(f"game {args.game}", report, live=True)


def _read_lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().splitlines() if line.strip()]


def _departed(what: str, lines: list[bytes], args: argparse.Namespace, keys: Any) -> int | None:
    """With --against: the exit status when the history lost or changed what the earlier copy holds (or the
    copy does not verify); None when it holds all of it, or without --against."""
    from server.ops.verify import against, verify

    if args.against is None:
        return None
    earlier = _read_lines(args.against)
    checked = verify(earlier, keys=keys, allow_unsigned=args.allow_unsigned)
    if not checked.ok:
        where = f" at version {checked.bad_version}" if checked.bad_version else ""
        print(f"orchestra: the earlier copy {args.against} does not verify{where}: {checked.problem}")
        return 1
    found = against(lines, earlier)
    if found is None:
        return None
    print(f"{what}: INVALID at version {found[0]}: {found[1]} ({args.against})")
    return 1


def _print_report(what: str, report: Any, live: bool) -> int:
    if not report.ok:
        where = f" at version {report.bad_version}" if report.bad_version else ""
        print(f"{what}: INVALID{where}: {report.problem}")
        return 1
    checked = "signatures, chain, versions and rules"
    if report.unsigned:
        checked += f" ({report.unsigned} envelopes unsigned, recorded before signing)"
    print(
        f"{what}: {report.envelopes} envelopes verified: {checked}"
        + ("; the live view matches" if live else "")
    )
    if report.ended:
        print("complete: the history ends with the game's signed end")
    elif report.trailer and not live:
        print(
            f"complete as exported: a signed trailer states version {report.envelopes}; "
            "the game had not ended"
        )
    else:
        print(
            "the game has not ended: envelopes dropped from its end would look the same "
            "(--against an earlier copy finds them)"
        )
    return 0


def _given_keys(texts: Sequence[str]) -> Any:
    """A keyring of base64 public keys; None (said) when one does not parse."""
    from server.engine.signing import Keyring, SigningKeyError, public_key_from_text

    try:
        return Keyring([public_key_from_text(text) for text in texts])
    except SigningKeyError as exc:
        print(f"orchestra: {exc}", file=sys.stderr)
        return None


def _local_keys(args: argparse.Namespace) -> Any:
    """The keys given with --public-key, else those of the local settings; None (said) if there are none."""
    from server.config import from_env
    from server.engine.signing import SigningKeyError
    from server.ops import signing_keys

    if args.public_key:
        return _given_keys(args.public_key)
    data_dir = getattr(args, "data_dir", None)
    try:
        settings = from_env(data_dir=data_dir and str(data_dir))
        keys = signing_keys.keyring(settings, signing_keys.load_signer(settings, create=False))
    except (ValueError, SigningKeyError, OSError) as exc:
        print(f"orchestra: {exc}", file=sys.stderr)
        return None
    if not len(keys):
        print(
            f"orchestra: no signing keys in {signing_keys.key_file(settings)} or the ORCHESTRA_SIGNING_* "
            "settings: give --public-key (GET /signing-keys lists the server's)",
            file=sys.stderr,
        )
        return None
    return keys


def _signing_key(args: argparse.Namespace) -> int:
    from server.config import from_env
    from server.engine.signing import Signer, SigningKeyError
    from server.ops import signing_keys

    if args.generate:
        signer = Signer.generate()
        print(f"ORCHESTRA_SIGNING_KEY={signer.private_text()}")
        print(f"key id {signer.key_id}, public key {signer.public_text()}")
        print("Keep the private key secret; give the same one to every node of a deployment.")
        return 0
    try:
        settings = from_env(
            data_dir=args.data_dir and str(args.data_dir),
            signing_key_file=args.key_file and str(args.key_file),
        )
        if args.rotate:
            if settings.signing_key:
                print(
                    "orchestra: the key is set by ORCHESTRA_SIGNING_KEY: rotate it there (see "
                    "docs/operations.md)",
                    file=sys.stderr,
                )
                return 2
            path = signing_keys.key_file(settings)
            old, new = signing_keys.rotate(path)
            print(f"retired {old.key_id} (its public key is in {signing_keys.retired_file(path)})")
            print(f"new key {new.key_id} in {path}: restart the nodes to sign with it")
        current = signing_keys.load_signer(settings, create=False)
        keys = signing_keys.keyring(settings, current)
    except (ValueError, SigningKeyError, OSError) as exc:
        print(f"orchestra: {exc}", file=sys.stderr)
        return 1
    if not len(keys):
        print(f"orchestra: no signing key at {signing_keys.key_file(settings)} (made on the first start)")
        return 1
    for line in signing_keys.describe(keys):
        print(line)
    return 0


def _archive(args: argparse.Namespace) -> int:
    from server.config import from_env
    from server.engine.signing import SigningKeyError
    from server.ops import signing_keys
    from server.ops.archive import ArchiveError, archive
    from server.ops.embedded_redis import URL_NAME, DataDirLocked, EmbeddedRedis
    from server.store import StoreError
    from server.store.redis import RedisEventStore

    keys = _local_keys(args)
    if keys is None:
        return 2
    try:  # the trailer is signed when this machine has the servers' key
        signer = signing_keys.load_signer(from_env(data_dir=str(args.data_dir)), create=False)
    except (ValueError, SigningKeyError, OSError):
        signer = None

    async def run() -> int:
        embedded: EmbeddedRedis | None = None
        url = args.redis_url
        if url is None:
            embedded = EmbeddedRedis(args.data_dir)
            try:
                url = await embedded.start()
            except DataDirLocked:  # the server runs on this data dir: use its Redis
                embedded = None
                try:  # 0600: readable by the server's user only
                    url = (args.data_dir / URL_NAME).read_text().strip()
                except OSError as exc:
                    print(f"orchestra: cannot read the running server's {URL_NAME}: {exc}", file=sys.stderr)
                    return 1
        store = await RedisEventStore.from_url(url)
        try:
            done = await archive(
                store,
                args.game,
                args.out,
                keys=keys,
                signer=signer,
                force=args.force,
                allow_unsigned=args.allow_unsigned,
            )
        except (ArchiveError, StoreError) as exc:
            print(f"orchestra: {exc}", file=sys.stderr)
            return 1
        finally:
            await store.close()
            if embedded is not None:
                await embedded.stop()
        print(f"game {done.game_id}: {done.envelopes} envelopes ({done.bytes} bytes) archived to {done.path}")
        print("verified and deleted from Redis")
        return 0

    return asyncio.run(run())


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
