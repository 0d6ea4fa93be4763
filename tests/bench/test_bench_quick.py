"""Every benchmark runs in --quick mode and leaves a sane JSON result (no timing assertions: the machines
are shared and noisy; benchmarks are measured, not tested).

The benchmarks run as `python -m bench <name> --quick` child processes, three at a time, each starting its
own redis-server on a free port; their results go to a temporary directory, never to bench/results/.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.redis import has_redis_server
from tests.support.waiting import until_sync

ROOT = Path(__file__).resolve().parents[2]
# The longest first, so that the last to end is a short one (slowloris and wall mostly wait: for the
# attacker's connections and deadlines, for the wall's ticks). With valgrind, the pipeline also counts
# instructions under callgrind, and so does the instructions benchmark (it needs valgrind).
HAS_VALGRIND = shutil.which("valgrind") is not None
NAMES = [
    "memory",
    "wall",
    "latency",
    "slowloris",
    *(["instructions"] if HAS_VALGRIND else []),
    "pipeline",
    "scaling",
    "restart",
    "writer",
    "signing",
    "gamelist",
    "throughput",
    "archive",
    "fanout",
    "store",
    "replay",
]
EXTRA_ARGS = {"pipeline": ["--callgrind"], "instructions": ["--simulate"]} if HAS_VALGRIND else {}
PARALLEL = 3
# A bound against a hang, not a speed test: on a loaded 2-core machine, running three at a time beside
# the rest of the suite, they take minutes.
TIMEOUT = 420.0


pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not has_redis_server(), reason="needs a redis-server binary"),
]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Run every benchmark once in --quick mode; their JSON results by name."""
    out = tmp_path_factory.mktemp("bench-results")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
    env["BENCH_RESULTS_DIR"] = str(out)
    waiting = list(NAMES)
    running: dict[str, tuple[subprocess.Popen[bytes], Any]] = {}
    failures: dict[str, str] = {}

    def step() -> bool:
        """Start what may start and collect what ended; whether all have ended."""
        while waiting and len(running) < PARALLEL:
            name = waiting.pop(0)
            log = (out / f"{name}.log").open("wb")
            process = subprocess.Popen(
                [sys.executable, "-m", "bench", name, "--quick", *EXTRA_ARGS.get(name, [])],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            running[name] = (process, log)
        for name, (process, log) in list(running.items()):
            if process.poll() is not None:
                log.close()
                del running[name]
                if process.returncode != 0:
                    failures[name] = (out / f"{name}.log").read_text(errors="replace")[-3000:]
        return not waiting and not running

    try:
        until_sync(step, TIMEOUT, "the quick benchmarks", interval=0.1)
    except AssertionError:
        for process, log in running.values():
            process.kill()
            process.wait(10)
            log.close()
        pytest.fail(f"benchmarks still running after {TIMEOUT} s: {sorted(running)}")
    assert not failures, failures
    return {name: json.loads((out / f"{name}.json").read_text()) for name in NAMES}


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _common(result: dict[str, Any], name: str) -> None:
    assert result["benchmark"] == name
    assert result["quick"] is True
    assert result["command"].startswith(f"python -m bench {name}")
    assert result["machine"]["cpus"] >= 1
    assert isinstance(result["summary"], dict)


def test_throughput(results: dict[str, dict[str, Any]]) -> None:
    result = results["throughput"]
    _common(result, "throughput")
    summary = result["summary"]
    for key in ("ours_commands_per_s", "minimal_commands_per_s", "ratio_ours_to_minimal"):
        assert _positive(summary[key]), key
    assert isinstance(summary["goal_met"], bool)
    for mode in ("sequential", "pipelined_50"):
        assert _positive(result["raw_redis"][mode]["appends_per_s"])
    for run in result["runs"]["ours"] + result["runs"]["minimal"]:
        assert run["accepted"] > 0
        assert _positive(run["ack_ms"]["p99"])
        assert _positive(run["server"]["cpu_seconds"])
        assert run["errors"] == {}


def test_latency(results: dict[str, dict[str, Any]]) -> None:
    result = results["latency"]
    _common(result, "latency")
    summary = result["summary"]
    for key in ("rate_per_s", "ours_p99_all_spectators_ms", "minimal_p99_all_spectators_ms"):
        assert _positive(summary[key]), key
    assert _positive(summary["ratio_p99_all_spectators"])
    assert _positive(summary["ratio_p99_whole_views_to_minimal_views"])
    assert result["runs"]["ours"]["config"]["mode"] == "open"
    # The minimal pipeline's frames carry views only when asked to (--views).
    assert summary["minimal_views_frame_bytes_mean"] > result["runs"]["minimal"]["spectator_frame_bytes_mean"]
    # Each of ours' runs asked for what it reports: deltas are smaller than whole views.
    assert result["runs"]["ours_delta"]["config"]["view"] == "delta"
    assert _positive(summary["ratio_p99_all_spectators_delta"])
    assert 0 < summary["ours_delta_frame_bytes_mean"] < summary["ours_frame_bytes_mean"]


def test_fanout(results: dict[str, dict[str, Any]]) -> None:
    result = results["fanout"]
    _common(result, "fanout")
    row = result["results"]["no_compression"]
    assert _positive(row["ours"]["median_ms"])
    assert _positive(row["websockets_broadcast"]["median_ms"])
    assert _positive(row["ours"]["frame_bytes"]) and _positive(row["websockets_broadcast"]["frame_bytes"])
    assert _positive(result["summary"]["ratio_no_compression"])


def test_replay(results: dict[str, dict[str, Any]]) -> None:
    result = results["replay"]
    _common(result, "replay")
    for key in ("decode_per_s", "fold_per_s", "live_ingest_per_s", "ratio_fold_to_decode"):
        assert _positive(result["fold"][key]), key
    rebuild = result["rebuild"]
    assert rebuild["games"] > 0
    assert _positive(rebuild["read_seconds"]) and _positive(rebuild["fold_seconds"])
    assert 0 < rebuild["read_share"] < 1


def test_memory(results: dict[str, dict[str, Any]]) -> None:
    result = results["memory"]
    _common(result, "memory")
    assert {row["server"] for row in result["idle"]} == {"ours", "minimal"}
    assert all(row["rss_mib_after"] > 0 for row in result["idle"])
    assert _positive(result["active_game"]["tracemalloc_kib_per_game"])
    steady = result["steady"]
    assert steady["totals"].get("accepted", 0) > 0
    assert len(steady["rss_mib_samples"]) >= 2


def test_scaling(results: dict[str, dict[str, Any]]) -> None:
    result = results["scaling"]
    _common(result, "scaling")
    assert [row["games"] for row in result["games"]] == [1, 10]
    for row in result["games"]:
        assert _positive(row["ours"]["commands_per_s"]) and _positive(row["minimal"]["commands_per_s"])
        assert _positive(row["ours"]["server_rss_mib_end"])
    cost = result["command_cost"]
    assert _positive(cost["new"]["decide_us_median"]) and _positive(cost["long"]["decide_us_median"])
    assert cost["long"]["events"] > cost["new"]["events"]
    assert _positive(cost["new"]["command_path_delta_us_median"])
    assert _positive(cost["long"]["command_path_delta_us_median"])


def test_pipeline(results: dict[str, dict[str, Any]]) -> None:
    result = results["pipeline"]
    _common(result, "pipeline")
    summary = result["summary"]
    assert _positive(summary["ours_us_per_command"]) and _positive(summary["minimal_work_us_per_command"])
    # Every command was accepted and its frame reached each of its game's 8 followers, once.
    assert summary["frames_written_per_command"] == 8.0
    # A signature is part of a command's path: it cannot cost more than the whole path.
    assert _positive(summary["signature_us"]) and summary["signature_us"] < summary["ours_us_per_command"]


def test_pipeline_counts_instructions_per_command_under_callgrind(results: dict[str, dict[str, Any]]) -> None:
    if not HAS_VALGRIND:
        pytest.skip("valgrind is not installed (Debian: apt-get install valgrind)")
    counted = results["pipeline"]["summary"]["ours_instructions_per_command"]
    # A command is hundreds of thousands of instructions; the interpreter's start and the warm-up, which
    # are not counted, are over a billion: a hundred commands counted with them would pass 10 million each.
    assert isinstance(counted, int) and 10_000 < counted < 5_000_000


def test_instructions_counts_the_measured_games_alone(results: dict[str, dict[str, Any]]) -> None:
    if not HAS_VALGRIND:
        pytest.skip("valgrind is not installed (Debian: apt-get install valgrind)")
    result = results["instructions"]
    _common(result, "instructions")
    config = result["config"]
    for label in ("ours", "minimal"):
        run = result["runs"][label]
        assert run["accepted"] == config["games"] * config["placements"]
        # A game of a few placements, its connections included, is millions of instructions; the
        # interpreter's start and the warm-up, which are not counted, are billions.
        assert 1_000_000 < run["per_game"] < 200_000_000, (label, run["per_game"])
        assert run["instructions"] == pytest.approx(run["per_game"] * config["games"])
        # With --simulate, the first of the simulated counts is the instructions themselves.
        assert run["simulated_per_game"]["Ir"] == pytest.approx(run["per_game"])
        assert 0 < run["simulated_per_game"]["Bcm"] < run["simulated_per_game"]["Bc"]
    # Ours' envelopes, read back from the streams: every one in a signed batch.
    signed = result["runs"]["ours"]["checkpoints"]
    assert signed["envelopes"] >= result["runs"]["ours"]["accepted"] and signed["signed_alone"] == 0
    assert 1 <= signed["envelopes_per_checkpoint"] <= signed["largest_checkpoint"]
    assert result["runs"]["minimal"]["checkpoints"] is None
    ratio = result["summary"]["ours_to_minimal"]
    assert ratio == pytest.approx(result["runs"]["ours"]["per_game"] / result["runs"]["minimal"]["per_game"])
    assert result["summary"]["simulated_ours_to_minimal"]["Ir"] == pytest.approx(ratio)


def test_writer(results: dict[str, dict[str, Any]]) -> None:
    result = results["writer"]
    _common(result, "writer")
    (pair,) = result["pairs"]
    for mode in ("direct", "asgi"):
        run = pair[mode]
        assert run["accepted"] > 0 and run["errors"] == {} and run["incomplete"] == 0
        assert _positive(run["commands_per_s"]) and _positive(run["cpu_us_per_command"])
    summary = result["summary"]
    assert all(_positive(summary[key]) for key in ("throughput", "cpu_per_command", "p99"))
    assert isinstance(summary["buys_more_than_10_percent"], bool)


def test_signing(results: dict[str, dict[str, Any]]) -> None:
    result = results["signing"]
    _common(result, "signing")
    (runs,) = result["sets"]
    assert set(runs) == {"plain", "padded", "signed"}
    for run in runs.values():
        assert run["accepted"] > 0 and run["errors"] == {} and run["incomplete"] == 0
        assert _positive(run["commands_per_s"]) and _positive(run["cpu_us_per_command"])
    summary = result["summary"]
    for mode in ("signed", "padded"):
        against = summary[mode]
        assert all(_positive(against[key]) for key in ("throughput", "cpu_per_command", "p99"))
        # A difference of two noisy runs: of any sign, but the one these two runs measured.
        added = runs[mode]["cpu_us_per_command"] - runs["plain"]["cpu_us_per_command"]
        assert against["cpu_us_added_per_command"] == pytest.approx(added)
    assert 1 < summary["signature_alone_us"] < 10_000


def test_store(results: dict[str, dict[str, Any]]) -> None:
    result = results["store"]
    _common(result, "store")
    one_at_a_time = {
        "ours_redis_no_aof",
        "ours_redis_fsync_always",
        "eventsourcing_popo",
        "eventsourcing_sqlite_full",
        "eventsourcing_sqlite_normal",
    }
    grouped = {name + "_grouped" for name in one_at_a_time - {"eventsourcing_popo"}}
    concurrent = {name + "_concurrent" for name in one_at_a_time - {"eventsourcing_popo"}}
    assert set(result["results"]) == one_at_a_time | grouped | concurrent
    disk = result["summary"]["fdatasync_us"]
    assert _positive(disk["append_grow_us"]) and _positive(disk["overwrite_us"])
    for row in result["results"].values():
        assert _positive(row["appends_per_s"]) and _positive(row["loaded_events_per_s"])
        assert row["events_loaded"] == result["games"] * result["events_per_game"]
        assert row["durability"]
    summary = result["summary"]
    # --quick is one run: its medians are that run's own ratios.
    assert summary["runs"] == 1 and len(result["runs"]) == 1
    assert (
        summary["ratio_grouped_ours_fsync_always_to_sqlite_full"]
        == (result["runs"][0]["ratios"]["ratio_grouped_ours_fsync_always_to_sqlite_full"])
    )
    assert _positive(summary["ratio_concurrent_ours_fsync_always_to_sqlite_full"])
    floors = summary["floors_to_sqlite_full"]
    # The scripted round from Python needs no redis-benchmark; the C client's floors do.
    assert _positive(floors["python_script_rounds_to_grouped"])
    for name in ("c_client_one_at_a_time_to_sequential", "c_client_rounds_to_grouped"):
        assert floors[name] is None or _positive(floors[name])


@pytest.mark.parametrize("server", ["ours", "minimal"])
def test_profile_samples_either_server_in_open_loop(tmp_path: Path, server: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
    env["BENCH_RESULTS_DIR"] = str(tmp_path)
    command = [sys.executable, "-m", "bench", "profile", "--quick", "--no-compression"]
    command += ["--open-rate", "200", "--server", server]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stdout.decode(errors="replace")[-3000:]
    name = "profile_no_compression_open" if server == "ours" else "profile_minimal_no_compression_open"
    result = json.loads((tmp_path / f"{name}.json").read_text())
    assert result["load"]["server_kind"] == server
    assert result["load"]["config"]["mode"] == "open"
    assert result["load"]["accepted"] > 0
    assert result["summary"]["samples"] > 0 and result["profile"]["self"]
    assert (tmp_path / f"{name}.txt").stat().st_size > 0


def test_restart(results: dict[str, dict[str, Any]]) -> None:
    result = results["restart"]
    _common(result, "restart")
    storm, restart = result["storm"], result["restart"]
    # Every spectator of a hello storm larger than the Redis pool is welcomed.
    assert storm["spectators"] > 128 and storm["welcomed"] == storm["spectators"]
    # Every client comes back after a SIGTERM restart, within the goal, and misses nothing.
    assert restart["clients"] >= 100 and restart["not_back"] == 0
    assert restart["incomplete"] == 0 and restart["first_problems"] == []
    assert 0 < restart["all_back_seconds"] <= restart["goal_seconds"]


def test_gamelist(results: dict[str, dict[str, Any]]) -> None:
    result = results["gamelist"]
    _common(result, "gamelist")
    summary = result["summary"]
    assert summary["private_games"] >= 300 and summary["listed"] == result["config"]["public"]
    assert _positive(summary["median_ms_without_private"]) and _positive(summary["median_ms_with_private"])
    assert _positive(summary["ratio_median_with_to_without"])
    # What holds whatever the machine's noise: the list reads the listed games' streams alone, as many with
    # the private games as without, and loads no game into the server's memory.
    assert summary["same_stream_reads"] and summary["stream_reads_per_call"] == result["config"]["public"]
    assert summary["games_held_after_listing"] == 0


def test_slowloris(results: dict[str, dict[str, Any]]) -> None:
    result = results["slowloris"]
    _common(result, "slowloris")
    runs = result["runs"]
    assert set(runs) == {"defaults", "cycled", "held"}
    for run in runs.values():
        # Every probe from the other address was answered, while the attacker held connections.
        assert run["probe"]["failures"] == {} and run["probe"]["wait_ms"]["count"] > 0
        assert _positive(run["probe"]["wait_ms"]["max"]) and run["attacker"]["most_held"] > 0
    # Past the per-address limit, the attacker's connections were refused at once and counted; with no
    # limit it held them all, and only their deadline closed them.
    defaults = runs["defaults"]
    assert defaults["attacker"]["most_held"] <= 100 < defaults["attacker"]["opened"]
    assert defaults["node_refused"]["per_address"] > 0 and defaults["attacker"]["refused"] > 0
    assert runs["cycled"]["node_refused"]["head_timeout"] > 0
    assert runs["held"]["attacker"]["most_held"] == result["summary"]["connections"]
    assert sum(runs["held"]["node_refused"].values()) == 0


def test_archive(results: dict[str, dict[str, Any]]) -> None:
    result = results["archive"]
    _common(result, "archive")
    summary = result["summary"]
    assert summary["games"] == result["config"]["games"] > 0
    for key in (
        "ours_archive_games_per_s",
        "ours_import_games_per_s",
        "baseline_dump_games_per_s",
        "baseline_restore_games_per_s",
        "ratio_archive_to_dump",
        "ratio_import_to_restore",
        "ours_archive_cpu_ms_per_game",
    ):
        assert _positive(summary[key]), key
    # The games were played many at once: their envelopes were signed in batches, none alone.
    signed = result["config"]["checkpoints"]
    assert signed["envelopes"] == summary["envelopes_per_game"] * summary["games"]
    assert signed["signed_alone"] == 0
    assert summary["envelopes_per_checkpoint"] == signed["envelopes_per_checkpoint"] >= 1
    # Both round trips gave back every stream byte for byte.
    assert summary["identical"] is True
    assert all(run["identical"] for run in result["runs"]["ours"] + result["runs"]["baseline"])


def test_wall(results: dict[str, dict[str, Any]]) -> None:
    result = results["wall"]
    _common(result, "wall")
    summary, phases = result["summary"], result["phases"]
    assert list(phases) == ["nobody_watches", "watched", "watched_with_idle", "nobody_watches_again"]
    for phase in phases.values():
        assert phase["placements"] > 0 and _positive(phase["cpu_ms_per_placement"])
    for name in ("watched", "watched_with_idle"):
        assert phases[name]["frames"] > 0 and _positive(phases[name]["bytes_per_placement"])
        # Changes are gathered for a tenth of a second: the frames do not follow the placements one by one.
        assert phases[name]["frames"] < phases[name]["placements"]
    shown = summary["games_shown"]
    assert shown["watched_with_idle"] > shown["watched"]
    # The first frame grows with the games shown; a change's bytes do not.
    assert summary["first_frame_bytes"]["watched_with_idle"] > summary["first_frame_bytes"]["watched"]
    assert _positive(summary["ratio_bytes_per_placement_idle_to_busy_only"])
    assert _positive(summary["ratio_cpu_after_to_before_the_wall"])
