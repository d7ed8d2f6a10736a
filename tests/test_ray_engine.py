"""--engine ray against the local run: tau-bench's airline runs cut into 8 files (one
Parquet) on a local Ray of 2 CPUs; a worker killed mid-run; s3:// on a local moto; a
cluster of two worker nodes on this machine."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxcli.cli import cli

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

#: Settings under which the runs write stores (placeholders that stay) ...
ARGS = "--max-tokens 2000 --placeholder-threshold 60 -q"
#: ... and under which many conversations stay over budget (51 warnings).
WARNING_ARGS = "--max-tokens 1300 --placeholder-threshold 60 --keep-last 12 -q"


@pytest.fixture(scope="session")
def local_ray() -> Any:
    """One local Ray for the whole test session, held to 2 CPUs."""
    from ctxcli import ray_engine

    ray_engine.start(num_cpus=2)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 200 airline runs cut into 8 files: 6 JSON lines, one JSON array, the last
    Parquet with the messages as a list of structs and two columns beside them; and a
    SWE-agent trajectory (one JSON object)."""
    source = Path(__file__).resolve().parents[2] / "shared/data/tau-bench/gpt-4o-airline.json"
    if not source.is_file():
        pytest.skip("../shared/data is not here")
    runs = json.loads(source.read_text())
    here = tmp_path_factory.mktemp("airline-8")
    for k in range(6):
        with (here / f"part{k}.jsonl").open("w") as out:
            for run in runs[k * 25 : (k + 1) * 25]:
                out.write(
                    json.dumps({"id": f"{run['task_id']}-{run['trial']}", "messages": run["traj"]})
                    + "\n"
                )
    # A JSON array, as tau-bench writes it, and a SWE-agent trajectory (one object).
    (here / "part6.json").write_text(json.dumps(runs[150:175], indent=1))
    traj = source.parents[1] / "swe-agent/marshmallow-code__marshmallow-1867.traj"
    (here / "run.traj").write_bytes(traj.read_bytes())
    rows = [
        {"id": f"{r['task_id']}-{r['trial']}", "messages": r["traj"], "reward": r["reward"]}
        for r in runs[175:]
    ]
    pq.write_table(pa.Table.from_pylist(rows), here / "part7.parquet", row_group_size=10)
    return here


def run(*args: str) -> Any:
    result = CliRunner().invoke(cli, ["compress", *args])
    assert result.exit_code == 0, result.output
    return result


_LOCAL: dict[str, tuple[Path, str]] = {}


def local(folder: Path, args: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The local run's outputs and stderr under ``args`` (run once per module)."""
    if args not in _LOCAL:
        out = tmp_path_factory.mktemp("local")
        _LOCAL[args] = out, run(str(folder), "--out-dir", str(out), *shlex.split(args)).stderr
    return _LOCAL[args]


@pytest.fixture(scope="module")
def local_run(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return local(folder, ARGS, tmp_path_factory)


def assert_same(local: Path, other: Path, *, stores: bool = True) -> None:
    """Every file of ``local`` is in ``other``: JSON lines byte for byte, Parquet as an
    equal table, stats equal but for where the output went and the time."""
    names = sorted(p.name for p in local.iterdir())
    assert names == sorted(p.name for p in other.iterdir())
    assert stores == any(n.endswith(".store.jsonl") for n in names)
    for name in names:
        mine, theirs = local / name, other / name
        if name.endswith(".parquet"):
            a, b = pq.read_table(mine), pq.read_table(theirs)
            assert a.equals(b, check_metadata=True), name
        elif name.endswith(".stats.json"):
            a, b = json.loads(mine.read_text()), json.loads(theirs.read_text())
            for stats in (a, b):
                stats.pop("elapsed_seconds")
                stats["input"] = Path(stats["input"]).name
                stats["output"] = Path(stats["output"]).name
                stats["store"]["path"] = (
                    stats["store"]["path"] and Path(stats["store"]["path"]).name
                )
            assert a == b, name
        else:
            assert mine.read_bytes() == theirs.read_bytes(), name


def ours(stderr: str) -> list[str]:
    """ctxcli's own lines of a run's stderr (not Ray's log lines)."""
    return [line for line in stderr.splitlines() if line.startswith(("warning:", "error:"))]


def test_ray_output_and_stores_are_the_local_runs_and_restore_works(
    local_ray: Any, folder: Path, local_run: tuple[Path, str], tmp_path: Path
) -> None:
    result = run(str(folder), "--out-dir", str(tmp_path), "--engine", "ray", *shlex.split(ARGS))
    assert_same(local_run[0], tmp_path)
    assert ours(result.stderr) == ours(local_run[1])
    # restore works on these outputs as on the local ones, and gives the same
    restored = 0
    own = (".stats.json", ".store.jsonl")
    names = sorted(p.name for p in local_run[0].iterdir() if not p.name.endswith(own))
    assert len(names) == 9  # 6 JSON lines, a JSON array, a Parquet file, a trajectory
    for name in names:
        outputs = []
        for where in (local_run[0], tmp_path):
            outputs.append(tmp_path / f"restored-{where.name}-{name}")
            done = CliRunner().invoke(cli, ["restore", str(where / name), "-o", str(outputs[-1])])
            assert done.exit_code == 0, done.output
        restored += "restored 0 placeholders" not in done.stderr
        if not name.endswith(".parquet"):
            assert outputs[0].read_bytes() == outputs[1].read_bytes()
        else:
            assert pq.read_table(outputs[0]).equals(pq.read_table(outputs[1]))
    assert restored


def test_ray_warnings_and_stats_are_the_local_runs(
    local_ray: Any, folder: Path, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    before, stderr = local(folder, WARNING_ARGS, tmp_path_factory)
    result = run(
        str(folder), "--out-dir", str(tmp_path), "--engine", "ray", *shlex.split(WARNING_ARGS)
    )
    assert_same(before, tmp_path, stores=False)
    assert len(ours(stderr)) > 40
    assert ours(result.stderr) == ours(stderr)


def test_a_killed_worker_is_retried_and_nothing_is_lost_or_doubled(
    local_ray: Any, folder: Path, local_run: tuple[Path, str], tmp_path: Path
) -> None:
    from ctxcli import config, ray_engine
    from ctxcli.compress import Compressor, plan

    flag = tmp_path / "killed"
    out = tmp_path / "out"
    settings = config.resolve(
        None, max_tokens=2000, stage_options={"placeholder": {"threshold": 60}}
    )
    plans = plan([str(folder)], out_dir=str(out), restorable=True)
    ray_engine.compress_files(Compressor(settings), plans, kill_once=str(flag))
    assert flag.exists()  # a worker was killed: Ray ran its task again
    assert_same(local_run[0], out)


def test_a_bad_line_stops_the_run_with_its_file_and_line(local_ray: Any, tmp_path: Path) -> None:
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    (tmp_path / "a.jsonl").write_text(f"{good}\n{good}\n{{oops\n")
    result = CliRunner().invoke(
        cli, ["compress", str(tmp_path / "a.jsonl"), "--engine", "ray", "-q"]
    )
    assert result.exit_code == 1
    assert f"{tmp_path / 'a.jsonl'}:3: invalid JSON" in result.output
    assert not (tmp_path / "a.compressed.jsonl").exists()
    kept = CliRunner().invoke(
        cli, ["compress", str(tmp_path / "a.jsonl"), "--engine", "ray", "-q", "--on-error", "keep"]
    )
    assert kept.exit_code == 0, kept.output
    assert (tmp_path / "a.compressed.jsonl").read_text() == (tmp_path / "a.jsonl").read_text()


def test_a_named_store_is_added_to_on_ray_too(local_ray: Any, tmp_path: Path) -> None:
    # --engine ray replaced a store named with --store, as the local run did before.
    big = "a long line of tool output\n" * 300
    store = tmp_path / "shared.jsonl"
    for name in "ab":
        call = {"id": "c", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
        record = {
            "messages": [
                {"role": "user", "content": "Go."},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c", "content": f"{name}: {big}"},
                {"role": "assistant", "content": "Done."},
            ]
        }
        (tmp_path / f"{name}.jsonl").write_text(json.dumps(record) + "\n")
        args = [
            "compress",
            str(tmp_path / f"{name}.jsonl"),
            "-o",
            str(tmp_path / f"{name}.out.jsonl"),
        ]
        args += ["--store", str(store), "--engine", "ray", "-q", "--stages", "placeholder"]
        result = CliRunner().invoke(cli, [*args, "--placeholder-keep-recent", "0"])
        assert result.exit_code == 0, result.output
    for name in "ab":
        back = tmp_path / f"{name}.back.jsonl"
        restore = ["restore", str(tmp_path / f"{name}.out.jsonl"), "--store", str(store)]
        result = CliRunner().invoke(cli, [*restore, "-o", str(back)])
        assert result.exit_code == 0, result.output
        assert json.loads(back.read_text()) == json.loads((tmp_path / f"{name}.jsonl").read_text())


def test_compress_dataset_keeps_columns_and_order(local_ray: Any, folder: Path) -> None:
    from ctxcli import config
    from ctxcli.ray_engine import compress_dataset

    table = pq.read_table(folder / "part7.parquet")
    settings = config.resolve(None, stages="summary,priority", max_tokens=1500)
    out = pa.concat_tables(
        ray.get(compress_dataset(ray.data.from_arrow(table), settings).to_arrow_refs())
    )
    assert out.schema == table.schema
    assert out.column("id") == table.column("id") and out.column("reward") == table.column("reward")
    assert sum(map(len, out.column("messages").to_pylist())) < sum(
        map(len, table.column("messages").to_pylist())
    )


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A moto S3 server on 127.0.0.1 and a bucket; the AWS settings point at it."""
    moto_server = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="runs")
    yield client
    server.stop()


def test_s3_in_and_out_gives_the_local_output(
    s3: Any, folder: Path, local_run: tuple[Path, str], tmp_path: Path
) -> None:
    # Ray workers read the AWS settings from their environment: a Ray of its own, started
    # after they are set.
    from ctxcli import ray_engine

    ray.shutdown()
    try:
        ray_engine.start(num_cpus=2)
        for path in sorted(folder.iterdir()):
            s3.upload_file(str(path), "runs", f"in/{path.name}")
        run("s3://runs/in", "--out-dir", "s3://runs/out", "--engine", "ray", *shlex.split(ARGS))
        listed = s3.list_objects_v2(Bucket="runs", Prefix="out/")["Contents"]
        for entry in listed:
            s3.download_file("runs", entry["Key"], str(tmp_path / Path(entry["Key"]).name))
    finally:
        ray.shutdown()
        ray_engine.start(num_cpus=2)
    assert_same(local_run[0], tmp_path)


def test_a_cluster_of_two_worker_nodes_gives_the_local_output(
    folder: Path, local_run: tuple[Path, str], tmp_path: Path
) -> None:
    # A head node with no CPU (the driver only) and two nodes of one CPU each, on this
    # machine: every task runs on a node other than the driver's, each with its own
    # raylet and object store, so the pieces travel between nodes as on a cluster.
    from ray.cluster_utils import Cluster

    from ctxcli import ray_engine

    ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        out = tmp_path / "out"
        run(str(folder), "--out-dir", str(out), "--engine", "ray", "--ray-address",
            cluster.address, *shlex.split(ARGS))  # fmt: skip
        workers = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU")]
        assert len(workers) == 2
    finally:
        ray.shutdown()
        cluster.shutdown()
        ray_engine.start(num_cpus=2)
    assert_same(local_run[0], out)


def test_remote_inputs_may_be_globs(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    from ctxcli.errors import ConfigError
    from ctxcli.ray_engine import plan_remote

    for name in ("a/x.jsonl", "a/b/y.jsonl", "a/y.compressed.jsonl", "a/z.json", "c/w.jsonl"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    plans = plan_remote([f"file://{tmp_path}/a/*.jsonl"], out_dir=None, restorable=False)
    assert [p.input for p in plans] == [
        f"file://{tmp_path}/a/b/y.jsonl",
        f"file://{tmp_path}/a/x.jsonl",
    ]  # a * may stand for folders; ctxcli's own outputs are left out
    with pytest.raises(ConfigError, match="no file matches"):
        plan_remote([f"file://{tmp_path}/a/*.parquet"], out_dir=None, restorable=False)
