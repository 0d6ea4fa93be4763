"""The `orchestra` command: serve, create games, export and replay them."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from server.config import Settings

DEFAULT_SERVER = "http://127.0.0.1:8000"
# A seat left open by `orchestra new-game`: its player gives their name when they sit down.
OPEN_SEAT = "-"
# Where `orchestra demo` finds its bots: a package of the same distribution, never imported by the server.
DEMO_CLIENT = "orchestra_client.demo"


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
    _log_format_option(serve)
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
    _log_format_option(demo)
    demo.set_defaults(run=_demo)

    new = sub.add_parser(
        "new-game",
        help="create a game on a running server",
        description="Create a game on a running server and print each seat's secret token and links. "
        "The tokens are shown only once.",
    )
    new.add_argument(
        "names",
        nargs="+",
        metavar="NAME",
        help=f"the players, in seat order (1 to 4); {OPEN_SEAT} leaves a seat open for its player to name",
    )
    new.add_argument("--layout", default="standard", help="the board layout (default standard)")
    new.add_argument("--private", action="store_true", help="spectators need a watch token")
    new.add_argument(
        "--open", action="store_true", help="an open table: listed on the server's page for anyone to join"
    )
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
        "scores. With --file, check exported or archived NDJSON files offline instead (a folder stands for "
        "its *.ndjson files; several are checked with progress on stderr and a summary). Exits 1 and names "
        "the first bad version of each bad game when anything is wrong (130 when interrupted).",
    )
    check.add_argument("game", nargs="?", help="the game id (on the server; not with --file)")
    check.add_argument("--token", help="a watch or seat token, for a private game")
    check.add_argument(
        "--file",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="exported or archived games (or folders) to check",
    )
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
        help="export finished games to NDJSON and delete them from Redis",
        description="Write a finished game's envelopes to FILE, read the file back and verify it, and only "
        "then delete the game's stream and keys from Redis. With --all-ended or --ended-before, archive "
        "every such game into --out-dir as <id>.ndjson, with progress on stderr and a summary; run it again "
        "after an interruption to resume. Works with the server running (give --redis-url, or the same "
        "--data-dir as the embedded server) or stopped. Exits 0 when all succeeded, 1 when some failed, "
        "130 when interrupted.",
    )
    keep.add_argument("game", nargs="?", help="the game id (with --out)")
    keep.add_argument("--out", type=Path, metavar="FILE", help="the NDJSON file to write")
    keep.add_argument("--all-ended", action="store_true", help="archive every game that has ended")
    keep.add_argument(
        "--ended-before",
        metavar="DATE",
        help="archive every game that ended before DATE (2025-01-31, or an ISO 8601 time; UTC unless said)",
    )
    keep.add_argument(
        "--out-dir", type=Path, metavar="DIR", help="the folder of the files, with the two above"
    )
    _store_options(keep)
    keep.add_argument(
        "--force", action="store_true", help="archive even a game that has not ended (one game)"
    )
    _key_options(keep, data_dir=False)
    keep.set_defaults(run=_archive)

    restore = sub.add_parser(
        "import",
        help="restore archived games from their NDJSON files",
        description="Check each file as `verify --file` does and write its game back into Redis, whole and "
        "at once: its envelopes byte for byte, its command records, and its seat and watch credentials when "
        "the archive carries them (archives made with the signing key do). A file that does not verify is "
        "refused, and so is a game id the store holds with another history; one it holds the same (imported "
        "before) is skipped. A folder stands for its *.ndjson files. Works with the server running or "
        "stopped. Exits 0 when all succeeded, 1 when some failed, 130 when interrupted.",
    )
    restore.add_argument("files", nargs="+", type=Path, metavar="FILE", help="archive files or folders")
    restore.add_argument(
        "--skip-existing",
        action="store_true",
        help="skip a game whose id the store holds with another history",
    )
    restore.add_argument(
        "--open",
        action="store_true",
        help="accept a file that ends neither with the game's signed end nor with a trailer",
    )
    restore.add_argument(
        "--allow-retired-before",
        metavar="DATE",
        help="accept a file last signed by a retired key (an archive or export made before a rotation) when "
        "every envelope is dated before DATE (2025-01-31, or an ISO 8601 time; UTC unless said): a copy of "
        "the key taken later forges such files, so give the time you know it was still secret",
    )
    _store_options(restore)
    _key_options(restore, data_dir=False)
    restore.set_defaults(run=_import)

    from server.ops import records_command

    records_command.add_parser(sub)
    return parser


def _store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--redis-url", help="the Redis holding the games (default: the embedded one)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path("var"),
        help="the embedded Redis's data dir, where the signing keys are too (default ./var)",
    )


def _key_options(parser: argparse.ArgumentParser, data_dir: bool = True) -> None:
    parser.add_argument(
        "--public-key",
        action="append",
        metavar="KEY",
        help="a trusted public key (base64, as GET /signing-keys lists it), KEY@TIME for a key retired at "
        "TIME; repeat for several. Default: the server's GET /signing-keys online, else the keys of the "
        "local settings (ORCHESTRA_SIGNING_*, or --data-dir's signing.key and signing.key.retired)",
    )
    if data_dir:
        parser.add_argument("--data-dir", type=Path, help="where the local signing keys are (default ./var)")
    parser.add_argument(
        "--allow-unsigned",
        action="store_true",
        help="accept envelopes without a signature before the first signed one (games recorded before "
        "the server signed envelopes)",
    )


def _log_format_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-format",
        choices=("json", "text"),
        help="json: a JSON object per line (the default when standard error is not a terminal); text: "
        "warnings and errors in words (the default on a terminal). Also ORCHESTRA_LOG_FORMAT",
    )


def _server_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server", default=DEFAULT_SERVER, help=f"the server's URL (default {DEFAULT_SERVER})"
    )


def _settings(args: argparse.Namespace) -> Settings | None:
    """The server's settings: ORCHESTRA_* variables, then the command's options; None (said) if invalid,
    or if the API key is one a server must not start with (server.auth.api_key_problem)."""
    from server.auth import api_key_problem
    from server.config import from_env, redis_url_problem
    from server.engine.signing import SigningKeyError
    from server.ops import signing_keys

    try:
        settings = from_env(
            host=args.host,
            port=args.port,
            redis_url=args.redis_url,
            data_dir=args.data_dir and str(args.data_dir),
            log_format=args.log_format,
        )
    except ValueError as exc:
        print(f"orchestra: {exc}", file=sys.stderr)
        return None
    problem = api_key_problem(settings.api_key) or redis_url_problem(settings.redis_url)
    if problem is not None:
        print(f"orchestra: {problem}; the server was not started", file=sys.stderr)
        return None
    try:  # a key that does not parse or is readable by others, a named key file missing, a retired key
        signing_keys.keyring(settings, signing_keys.load_signer(settings, create=False))
    except SigningKeyError as exc:
        print(f"orchestra: {exc}; the server was not started", file=sys.stderr)
        return None
    return settings


def _serve(args: argparse.Namespace) -> int:
    from server.engine.signing import SigningKeyError
    from server.ops import logs, runner

    settings = _settings(args)
    if settings is None:
        return 2
    log_format = logs.setup(settings.log_level, log_format=settings.log_format)
    try:
        server = runner.uvicorn_server(settings)
    except SigningKeyError as exc:  # the default key could not be made (its directory not writable)
        print(f"orchestra: {exc}; the server was not started", file=sys.stderr)
        return 2

    async def announce() -> None:
        url = await runner.started_url(server)
        if url is not None:
            print(f"Orchestra server running at {url}/", flush=True)
            if log_format == "text":  # a person reads this: where to go, and how to stop
                print(f"  games:   {url}/\n  wall:    {url}/wall\n  metrics: {url}/metrics", flush=True)
                print("Press Ctrl-C to stop.", flush=True)

    async def run() -> None:
        watcher = asyncio.create_task(announce())
        try:
            await server.serve()
        finally:
            watcher.cancel()

    try:
        runner.run(run())
    except KeyboardInterrupt:  # Ctrl-C: uvicorn has shut down gracefully, then raised the signal again
        return 0
    return 0 if server.started else 1


def _demo(args: argparse.Namespace) -> int:
    from server.ops import logs, runner
    from server.ops.demo import run_demo

    if args.placements < 1 or args.pace[0] < 0 or args.pace[1] < args.pace[0]:
        print("orchestra: --placements must be >= 1 and --pace MIN MAX with 0 <= MIN <= MAX", file=sys.stderr)
        return 2
    client = _demo_client()
    if client is None:
        return 1
    settings = _settings(args)
    if settings is None:
        return 2
    logs.setup(settings.log_level, log_format=settings.log_format)
    options = client.DemoOptions(
        pace=(args.pace[0], args.pace[1]), placements=args.placements, seed=args.seed
    )

    async def play(base: str) -> object:
        return await client.play_demo(base, options, say=lambda line: print(line, flush=True))

    try:
        runner.run(run_demo(settings, play, exit_when_done=args.exit_when_done))
    except KeyboardInterrupt:
        return 0
    return 0


def _demo_client() -> Any:
    """The Python client's demo module, loaded only now: the server's packages import no client. None
    (said) when the client is not installed."""
    try:
        return importlib.import_module(DEMO_CLIENT)
    except ModuleNotFoundError as exc:
        if exc.name not in ("orchestra_client", DEMO_CLIENT):
            raise
        print(
            f"orchestra: the demo's bots are the Python client's ({DEMO_CLIENT}), which is not installed "
            "here; install the orchestra-server package whole (its wheel holds the client)",
            file=sys.stderr,
        )
        return None


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
    from server.ops import links

    base = args.server.rstrip("/")
    body: dict[str, object] = {
        "players": [None if name == OPEN_SEAT else name for name in args.names],
        "layout": args.layout,
        "spectators": "token" if args.private else "public",
    }
    if args.open:
        body["open"] = True
    status, answer = _request("POST", f"{base}/games", body, args.api_key)
    if status != 201:
        return _fail(status, answer)
    # On a terminal, each link a phone opens also as a QR code.
    links.print_links(base, json.loads(answer), print, qr=sys.stdout.isatty())
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
    from server.ops.bulk import checked
    from server.ops.verify import verify

    if (args.file is None) == (args.game is None):
        print("orchestra: give a game id (online) or --file FILE (offline), not both", file=sys.stderr)
        return 2
    if args.file is not None:
        keys = _local_keys(args)
        if keys is None:
            return 2
        if len(args.file) > 1 or args.file[0].is_dir():
            return _verify_files(args, keys)
        lines = _read_lines(args.file[0])
        if lines is None:
            return 1
        departed = _departed(str(args.file[0]), lines, args, keys)
        if departed is not None:
            return departed
        report = checked(lines, keys=keys, allow_unsigned=args.allow_unsigned, complete=not args.open)
        return _print_report(str(args.file[0]), report, live=False)
    base = f"{args.server.rstrip('/')}/games/{args.game}"
    if args.public_key:
        keys = _given_keys(args.public_key)
        if keys is None:
            return 2
    else:
        status, answer = _request("GET", f"{args.server.rstrip('/')}/signing-keys")
        if status != 200:
            return _fail(status, answer)
        listed = json.loads(answer)["keys"]
        # A retired key is held to its time: what it signed after its retirement is refused.
        timed = [k["public_key"] + (f"@{k['retired_at']}" if k.get("retired_at") else "") for k in listed]
        keys = _given_keys(timed)
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


def _verify_files(args: argparse.Namespace, keys: Any) -> int:
    from server.ops.bulk import files_of, verify_all
    from server.ops.progress import Progress

    if args.against is not None:
        print("orchestra: --against checks one game or file, not several", file=sys.stderr)
        return 2
    files = files_of(args.file)
    progress = Progress("verify", done_word="verified")
    return verify_all(files, progress, keys=keys, allow_unsigned=args.allow_unsigned, complete=not args.open)


def _read_lines(path: Path) -> list[bytes] | None:
    """The lines of an NDJSON file (a regular file, bounded: server.ops.files); None (said) if unreadable."""
    from server.ops.files import read_lines

    try:
        return read_lines(path)
    except OSError as exc:
        print(f"orchestra: cannot read {path}: {exc}", file=sys.stderr)
        return None


def _departed(what: str, lines: list[bytes], args: argparse.Namespace, keys: Any) -> int | None:
    """With --against: the exit status when the history lost or changed what the earlier copy holds (or the
    copy does not verify); None when it holds all of it, or without --against."""
    from server.ops.verify import against, verify

    if args.against is None:
        return None
    earlier = _read_lines(args.against)
    if earlier is None:
        return 1
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
    if report.retired_key:
        print(
            f"signed by the retired key {report.retired_key}, before its retirement: nothing newer vouches "
            "for it (`import` takes it only with --allow-retired-before DATE)"
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
    from server.engine.signing import Keyring, SigningKeyError, trusted_from_text

    try:
        return Keyring([trusted_from_text(text) for text in texts])
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
    from server.ops.archive import ArchiveError, archive
    from server.ops.bulk import archive_all, parse_date
    from server.ops.progress import Progress

    bulk = args.all_ended or args.ended_before is not None
    if bulk and (args.game or args.out or args.force or args.out_dir is None):
        print(
            "orchestra: --all-ended or --ended-before DATE takes --out-dir DIR (and no game)", file=sys.stderr
        )
        return 2
    if not bulk and (args.game is None or args.out is None or args.out_dir is not None):
        print(
            "orchestra: give a game and --out FILE, or --all-ended/--ended-before and --out-dir",
            file=sys.stderr,
        )
        return 2
    try:
        before = parse_date(args.ended_before) if args.ended_before is not None else None
    except ValueError:
        print(
            f"orchestra: --ended-before {args.ended_before!r} is not a date or an ISO 8601 time",
            file=sys.stderr,
        )
        return 2
    keys = _local_keys(args)
    if keys is None:
        return 2
    signer, _ = _local_signer(args.data_dir)

    async def run(store: Any) -> int:
        if bulk:
            progress = Progress("archive", done_word="archived")
            return await archive_all(
                store,
                args.out_dir,
                progress,
                keys=keys,
                signer=signer,
                before=before,
                allow_unsigned=args.allow_unsigned,
            )
        try:
            async with store.lease() as leased:
                done = await archive(
                    leased,
                    args.game,
                    args.out,
                    keys=keys,
                    signer=signer,
                    force=args.force,
                    allow_unsigned=args.allow_unsigned,
                )
        except (ArchiveError, OSError) as exc:
            print(f"orchestra: {exc}", file=sys.stderr)
            return 1
        print(f"game {done.game_id}: {done.envelopes} envelopes ({done.bytes} bytes) archived to {done.path}")
        print("verified and deleted from Redis")
        return 0

    return _with_store(args, run)


def _import(args: argparse.Namespace) -> int:
    from server.ops.bulk import files_of, import_all, parse_date
    from server.ops.progress import Progress

    try:
        vouched = parse_date(args.allow_retired_before) if args.allow_retired_before is not None else None
    except ValueError:
        print(
            f"orchestra: --allow-retired-before {args.allow_retired_before!r} is not a date", file=sys.stderr
        )
        return 2
    keys = _local_keys(args)
    if keys is None:
        return 2
    _, settings = _local_signer(args.data_dir)
    files = files_of(args.files)

    async def run(store: Any) -> int:
        progress = Progress("import", done_word="imported")
        return await import_all(
            store,
            files,
            progress,
            keys=keys,
            allow_unsigned=args.allow_unsigned,
            complete=not args.open,
            skip_existing=args.skip_existing,
            max_live=settings.max_games if settings is not None else 0,
            retired_before=vouched,
        )

    return _with_store(args, run)


def _local_signer(data_dir: Path) -> tuple[Any, Settings | None]:
    """The servers' signer when this machine has the key (else None), and the local settings."""
    from server.config import from_env
    from server.engine.signing import SigningKeyError
    from server.ops import signing_keys

    try:
        settings = from_env(data_dir=str(data_dir))
    except ValueError:
        return None, None
    try:  # an archive's trailer is signed when this machine has the servers' key
        return signing_keys.load_signer(settings, create=False), settings
    except (ValueError, SigningKeyError, OSError):
        return None, settings


def _with_store(args: argparse.Namespace, run: Callable[[Any], Awaitable[int]]) -> int:
    """Run `run` on the store of --redis-url or --data-dir; its exit status (1 when the store fails, 130
    when interrupted before the run could stop on its own)."""
    from server.ops.embedded_redis import EmbeddedRedisError
    from server.ops.local_store import LocalStoreError, opened
    from server.ops.progress import INTERRUPTED
    from server.store import StoreError

    async def main() -> int:
        async with opened(args.redis_url, args.data_dir) as store:
            return await run(store)

    try:
        return asyncio.run(main())
    except (LocalStoreError, StoreError, EmbeddedRedisError) as exc:
        print(f"orchestra: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, asyncio.CancelledError):  # stopped before the run could stop on its own
        print("orchestra: interrupted", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
