"""nccl-tests import: every era, the -J JSON, real-log noise, bad files; through the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.comm import nccl_tests_parse as fmt
from tests.comm import nccl_samples as s
from tests.helpers import query, run_cli


def _parse(text: str, name: str = "x.log") -> fmt.Parsed:
    return fmt.parse(text, name)


def test_old_era_rows_error_column_and_footer() -> None:
    p = _parse(s.OLD_ERA, "all_reduce_perf.log")
    assert [r.size for r in p.rows] == [8, 1024, 1048576]
    assert p.ops == ["all_reduce"] and p.dtypes == ["fp32"] and p.world_size == 2
    assert p.gpu_names == ["Tesla V100-SXM2-32GB"] and p.hostname == "node-a"
    big = p.rows[2]
    assert big.root is None and big.redop == "sum"
    assert big.out_of_place.time_us == pytest.approx(40.12)
    assert big.in_place.busbw_gbps == pytest.approx(26.30)
    assert big.out_of_place.wrong is None  # `error` is a max error, not a count
    assert p.avg_busbw_gbps == pytest.approx(s.OLD_AVG, abs=1e-9)
    assert p.footers == [pytest.approx(s.OLD_AVG, rel=1e-5)]
    assert p.nccl_tests_version == "<=2.12 (inferred)" and p.iters == 20


def test_old_alltoall_with_empty_redop() -> None:
    p = _parse(s.OLD_ALLTOALL, "alltoall_perf.txt")
    assert len(p.rows) == 3 and all(r.redop is None and r.root is None for r in p.rows)
    assert p.ops == ["all_to_all"]
    assert p.rows[2].in_place.time_us == pytest.approx(31.0)


def test_oldest_builds_print_milliseconds() -> None:
    p = _parse(s.MS_ERA, "all_reduce_perf.log")
    assert p.rows[0].out_of_place.time_us == pytest.approx(100.0)
    assert p.rows[0].in_place.time_us == pytest.approx(99.0)


def test_mid_era_root_wrong_na_in_place_and_size_zero() -> None:
    p = _parse(s.MID_ERA, "alltoall_perf.log")
    assert [r.size for r in p.rows] == [0, 14336, 229376]  # the size-0 row is kept
    assert all(r.root == -1 for r in p.rows)
    assert p.rows[1].in_place == fmt.Half(None, None, None, None)
    assert p.rows[2].out_of_place.time_us == pytest.approx(1007.0)
    assert p.rows[1].out_of_place.wrong == 0
    assert p.world_size == 8 and p.ops == ["all_to_all"] and p.dtypes == ["bf16"]
    assert p.nccl_tests_version == "2.13-2.17.2 (inferred)"
    # mean over the halves that have a busbw: 0, 0, 0.56, 0.20
    assert p.avg_busbw_gbps == pytest.approx((0.56 + 0.20) / 4)


@pytest.mark.parametrize("bad", ["nan", "-nan", "inf"])
def test_wrong_count_that_is_not_a_number_reads_as_unchecked(bad: str) -> None:
    lines = s.MID_ERA.splitlines()
    i = next(i for i, line in enumerate(lines) if line.split()[:1] == ["0"])
    tokens = lines[i].split()
    tokens[8] = bad  # the out-of-place #wrong of the size-0 row
    text = "\n".join([*lines[:i], " ".join(tokens), *lines[i + 1:]])
    p = _parse(text, "alltoall_perf.log")
    assert p.rows[0].out_of_place.wrong is None and p.rows[0].in_place.wrong == 0
    report = s.json_report(4).replace('"nwrong": 0.0', '"nwrong": NaN', 1)
    assert report != s.json_report(4)
    assert _parse(report, "out.json").rows[0].out_of_place.wrong is None


@pytest.mark.parametrize("text", [s.V2_17_3, s.V2_18], ids=["2.17.3", "2.18.1"])
def test_new_eras_version_lines(text: str) -> None:
    p = _parse(text, "whatever.log")  # the op comes from "# Collective test starting"
    assert p.ops == ["all_reduce"] and p.world_size == 8
    assert p.nccl_tests_version in ("2.17.3", "2.18.1")
    assert p.nccl_version == "2.21.5"  # nccl-library=22105
    assert p.gpu_names == ["NVIDIA H100 80GB HBM3"] and p.hostname == "nvl-node"
    assert len(p.rows) == 3 and p.rows[2].out_of_place.busbw_gbps == pytest.approx(317.19)
    assert p.avg_busbw_gbps == pytest.approx(sum(s.busbws(*s.NEW_ROWS)) / 6)
    assert p.footers[0] == pytest.approx(p.avg_busbw_gbps, rel=1e-5)


@pytest.mark.parametrize(
    "text", [s.MPIRUN, s.BRACKET, s.SRUN, s.NCCL_INFO, s.NCCL_VERSION_LINES],
    ids=["mpirun-prefix", "bracket-prefix", "srun-prefix", "nccl-info", "nccl-version"],
)  # fmt: skip
def test_noise_does_not_change_the_table(text: str) -> None:
    clean, noisy = _parse(s.V2_18), _parse(text)
    assert noisy.rows == clean.rows
    assert noisy.world_size == 8 and noisy.footers == clean.footers
    assert noisy.ops == ["all_reduce"]


def test_nccl_version_line_is_read() -> None:
    p = _parse(s.NCCL_VERSION_LINES)
    assert p.nccl_version == "2.21.5"


def test_missing_footer_and_preamble() -> None:
    p = _parse(s.NO_FOOTER)
    assert p.footers == [] and len(p.rows) == 3
    q = _parse(s.NO_PREAMBLE, "all_reduce_perf.out")
    assert q.gpu_names == [] and q.world_size is None and len(q.rows) == 3
    assert q.ops == ["all_reduce"]  # from the file name
    assert fmt.infer_world_size(q) == 8  # busbw/algbw = 2(n-1)/n


def test_per_iteration_columns_and_timestamps() -> None:
    p = _parse(s.PER_ITER)
    (r,) = p.rows
    assert p.ops == ["reduce_scatter"] and r.root == -1
    assert r.out_of_place.time_us == pytest.approx(20.10) and r.in_place.time_us == 20.0
    assert r.in_place.busbw_gbps == pytest.approx(0.15)


def test_json_report() -> None:
    p = _parse(s.json_report(4), "out.json")
    assert p.format == "json" and p.ops == ["all_gather"] and p.world_size == 4
    assert p.gpu_names == ["NVIDIA H200"] and p.hostname == "json-host"
    assert p.nccl_version == "2.27.3" and p.iters == 20 and p.graph is False
    assert p.nccl_env == {"NCCL_DEBUG": "INFO", "NCCL_P2P_LEVEL": "SYS"}
    assert [r.size for r in p.rows] == [1024, 1048576] and p.rows[0].root == -1
    assert p.rows[1].out_of_place.time_us == 60.0 and p.rows[1].in_place.wrong == 0
    assert p.avg_busbw_gbps == pytest.approx(p.footers[0])


@pytest.mark.parametrize(
    "text", ["", "hello\nworld\n", "# Avg bus bandwidth : 3\n", '{"results": []}', '{"resu'],
    ids=["empty", "prose", "footer-only", "json-empty", "json-truncated"],
)  # fmt: skip
def test_files_without_a_table(text: str) -> None:
    with pytest.raises(fmt.NotNcclTests):
        _parse(text)


# ---- the real CLI ----------------------------------------------------------------------------


def _write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def test_cli_import_json_summary_rows_and_reimport(store_path: Path, tmp_path: Path) -> None:
    log = _write(tmp_path, "run.log", s.MPIRUN)
    res = run_cli(store_path, "nccl-tests", str(log), "--json")
    assert res.code == 0, res.stderr
    out = res.json
    assert out["op"] == "all_reduce" and out["world_size"] == 8 and out["dtype"] == "fp32"
    assert out["rows"] == 3 and out["committed"] is True
    assert out["avg_busbw_gbps"] == pytest.approx(sum(s.busbws(*s.NEW_ROWS)) / 6)
    assert out["footer_avg_busbw_gbps"] == pytest.approx(out["avg_busbw_gbps"], rel=1e-5)
    rows = query(store_path, "SELECT op, bytes, in_place, p50_us, mean_us, p10_us, busbw_gbps, "
                 "host, source, world_size FROM v_comm_results WHERE run_id = ? "
                 "ORDER BY bytes, in_place", [out["run_id"]])  # fmt: skip
    assert len(rows) == 6
    assert rows[4] == ("all_reduce", 134217728, False, 740.5, 740.5, None, 317.19, "nvl-node",
                       "nccl-tests", 8)  # fmt: skip
    again = run_cli(store_path, "nccl-tests", str(log), "--json")
    assert again.code == 0 and again.json["run_id"] == out["run_id"]
    assert query(store_path, "SELECT count(*) FROM comm_results")[0][0] == 6
    meta = query(store_path, "SELECT nccl_tests_version, gpu_names, interconnect, "
                 "footer_avg_busbw_gbps IS NOT NULL FROM comm_meta")  # fmt: skip
    assert meta == [("2.18.1", "NVIDIA H100 80GB HBM3", "unknown", True)]


def test_cli_footer_null_when_absent_and_op_flag(store_path: Path, tmp_path: Path) -> None:
    log = _write(tmp_path, "mystery.txt", s.MID_ERA.replace("# Avg bus bandwidth", "#"))
    res = run_cli(store_path, "nccl-tests", str(log))
    assert res.code == 1 and "mystery.txt" in res.stderr and "--op" in res.stderr
    ok = run_cli(store_path, "nccl-tests", str(log), "--op", "all_to_all", "--json",
                 "--interconnect", "pcie-only")  # fmt: skip
    assert ok.code == 0, ok.stderr
    assert ok.json["footer_avg_busbw_gbps"] is None and ok.json["op"] == "all_to_all"
    assert ok.json["rows"] == 3 and ok.json["dtype"] == "bf16"


def test_cli_json_file(store_path: Path, tmp_path: Path) -> None:
    res = run_cli(store_path, "nccl-tests", str(_write(tmp_path, "ag.json", s.json_report(4))),
                  "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    assert res.json["op"] == "all_gather" and res.json["world_size"] == 4 and res.json["rows"] == 2
    env = query(store_path, "SELECT nccl_env, nccl_version FROM comm_meta")[0]
    assert '"NCCL_P2P_LEVEL": "SYS"' in env[0] and env[1] == "2.27.3"


def test_cli_bad_file_names_it_and_commits_nothing(store_path: Path, tmp_path: Path) -> None:
    good = _write(tmp_path, "good.log", s.V2_18)
    bad = _write(tmp_path, "notes.txt", "just some notes\n")
    res = run_cli(store_path, "nccl-tests", str(good), str(bad))
    assert res.code == 1
    assert "notes.txt" in res.stderr and "no nccl-tests result table" in res.stderr
    assert "Traceback" not in res.stderr
    assert not store_path.exists()  # the good file was not committed either
    missing = run_cli(store_path, "nccl-tests", str(tmp_path / "nope.log"))
    assert missing.code == 1 and "nope.log" in missing.stderr
