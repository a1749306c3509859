"""The audit report on real runs: tables equal the stage stats, compare deltas, and the page in Chromium."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from codecorpus import schema
from codecorpus.cli import app
from codecorpus.config import load_recipe_data
from codecorpus.filters import rules as filter_rules
from codecorpus.reports.assets import CHARTS_JS, ERROR_TRAP
from codecorpus.reports.build import write_report
from codecorpus.runtime.executor import Executor
from conftest import write_repos

MAX_FILE_BYTES = 10_000
SECRET = "reach jane.doe@corp-mail.net for the deploy key\n"


def plant(corpus: Path) -> Path:
    """The fixture repositories plus a file over the size cap, a comment-only C file (comment_frac_max),
    a JSON file over 5000 bytes (data_bytes_max), an XML file of bare markup (xml_text_frac), a text
    with an e-mail address (redacted) and a symlink."""
    a = corpus / "repo-a"
    (a / "huge.txt").write_text("word " * (MAX_FILE_BYTES // 4))
    (a / "legacy.c").write_text("/* " + "old code, kept for reference\n" * 40 + "*/\nint x;\n")
    (a / "data.json").write_text("[\n" + ",\n".join(f'{{"k": {i}, "v": "value {i}"}}' for i in range(300)) + "]\n")
    (a / "NOTES.txt").write_text("Release notes.\n" + SECRET)
    (a / "layout.xml").write_text("<root>\n" + "".join(f'  <item id="{i}"/>\n' for i in range(40)) + "</root>\n")
    (a / "link.py").symlink_to("main.py")
    return corpus


def recipe(corpus: Path, out: Path, **filters) -> dict:
    return {
        "name": "report-e2e", "seed": 1, "out": str(out),
        "sources": [{"type": "local", "name": "fixture", "path": str(corpus)}],
        "stages": {"ingest": {"shard_bytes": 300, "max_file_bytes": MAX_FILE_BYTES}, "langid": {},
                   "filters": dict(filters), "dedup": {"buckets": 2}, "tokenize": {}, "pack": {}},
        "tokenizer": {"builtin": "gpt2"},
        "outputs": [{"name": "mixed", "seq_len": 64, "mix": {"budget_tokens": 1500, "max_epochs": 8}},
                    {"name": "plain", "seq_len": 64},
                    {"name": "long", "kind": "long", "seq_len": 512, "long": {"markers": "text"}}],
    }


def run(data: dict, run_dir: Path) -> None:
    Executor(load_recipe_data(data), run_dir, quiet=True).run_pipeline()
    write_report(run_dir)  # as `codecorpus run` does after the run


@pytest.fixture(scope="module")
def runs(tmp_path_factory, ray_local):
    """Run A (default filters) and run B (its copy, rerun with the line-length filters relaxed)."""
    corpus = plant(write_repos(tmp_path_factory.mktemp("corpus")))
    a = tmp_path_factory.mktemp("run") / "a"
    run(recipe(corpus, a), a)
    b = a.parent / "b"
    shutil.copytree(a, b)
    run(recipe(corpus, b, max_line_len=3000, max_mean_line_len=3000), b)
    write_report(a, compare_to=b)
    return a, b


def table(run_dir: Path, name: str) -> list[dict]:
    return pq.read_table(schema.RunPaths(run_dir).report_table(name, ".parquet")).to_pylist()


def stats(run_dir: Path, stage: str) -> dict:
    return json.loads(schema.RunPaths(run_dir).stats(stage).read_text())


STAGES = ["ingest", "langid", "filters", "dedup", "tokenize", "pack"]


def test_funnel_and_mix_tables_equal_the_stage_stats(runs):
    a, _ = runs
    funnel = table(a, "funnel")
    assert [r["stage"] for r in funnel if r["set"] is None] == STAGES
    assert [r["set"] for r in funnel if r["set"] is not None] == ["long", "mixed", "plain"]
    for r in (r for r in funnel if r["set"] is not None):  # a set's row: what its manifest says it holds
        totals = json.loads(schema.RunPaths(a).set_manifest(r["set"]).read_text())["totals"]
        assert (r["stage"], r["step"], r["docs_out"], r["tokens_out"]) == (
            "pack", STAGES.index("pack"), totals["documents"], totals["tokens"])
    for r in (r for r in funnel if r["set"] is None):
        s = stats(a, r["stage"])
        assert (r["docs_in"], r["docs_out"], r["docs_dropped"]) == (s["rows_in"], s["rows_out"], sum(s["dropped"].values()))
        assert (r["bytes_in"], r["bytes_out"], r["bytes_dropped"]) == (
            s["bytes_in"], s["bytes_out"], sum(s["dropped_bytes"].values()))
        if r["stage"] == "tokenize":
            assert r["tokens_out"] == s["tokens_out"] > 0
        else:
            assert r["tokens_out"] is None  # not known before tokenize; per set after it
    mix = table(a, "mix_by_stage")
    for stage in STAGES:
        s = stats(a, stage)
        for side in ("in", "out"):
            got = {r["lang"]: [r["docs"], r["bytes"], r["tokens"] or 0] for r in mix if (r["stage"], r["side"]) == (stage, side)}
            assert got == s[f"langs_{side}"], (stage, side)
            shares = [r["docs_share"] for r in mix if (r["stage"], r["side"]) == (stage, side)]
            assert not shares or abs(sum(shares) - 1) < 1e-9


def test_drop_and_dedup_tables_equal_the_stage_stats(runs):
    a, _ = runs
    drops = table(a, "drops")
    for stage in STAGES:
        s = stats(a, stage)
        by_lang: dict[str, dict[str, int]] = {}
        by_reason: dict[str, int] = {}
        for r in (r for r in drops if r["stage"] == stage):
            by_lang.setdefault(r["lang"], {})[r["reason"]] = r["docs"]
            by_reason[r["reason"]] = by_reason.get(r["reason"], 0) + r["bytes"]
        assert by_lang == s["dropped_by_lang"], stage
        assert by_reason == s["dropped_bytes"], stage
    assert {(r["stage"], r["reason"]) for r in drops} >= {("filters", "max_line_len"), ("dedup", "exact_duplicate")}
    dedup = {r["lang"]: r for r in table(a, "dedup_by_lang")}
    assert dedup["Python"]["duplicates"] == 1 and dedup["Python"]["dup_rate"] == pytest.approx(1 / 2)
    sizes = table(a, "cluster_sizes")
    assert {(r["size"], r["clusters"]) for r in sizes} >= {(2, 1)}  # main.py and its copy


def test_filter_section_shows_every_dropping_rule(runs):
    """Every reason in the filters drop log is a rule of the section, with its real direction, its
    thresholds per language and the drop log's count; the histograms hold what the rule scored."""
    a, _ = runs
    log = pl.read_parquet(schema.RunPaths(a).dropped_dir("filters") / "*.parquet")
    by_reason = dict(log.group_by("reason").len().iter_rows())
    assert {"max_line_len", "comment_frac_max", "data_bytes_max"} <= set(by_reason)
    rules = {r["rule"]: r for r in table(a, "filter_rules")}
    assert {k: rules[k]["dropped"] for k in by_reason} == by_reason
    for name in set(by_reason) & set(filter_rules.BY_NAME):
        assert rules[name]["direction"] == filter_rules.BY_NAME[name].direction
    assert (rules["alpha_frac"]["direction"], rules["xml_text_frac"]["direction"]) == ("min", "min")
    assert rules["comment_frac_max"]["column"] == "comment_frac" and "0.8" in rules["comment_frac_max"]["thresholds"]
    thresholds = table(a, "filter_thresholds")
    drops_by_lang = {(r["reason"], r["lang"], r["threshold"]): r["len"] for r in
                     log.group_by("reason", "lang", "threshold").len().iter_rows(named=True)}
    assert {(r["rule"], r["lang"], r["threshold"]): r["dropped"] for r in thresholds if r["dropped"]} == drops_by_lang
    assert {(r["lang"], r["threshold"]) for r in thresholds if r["rule"] == "max_line_len"} >= {
        ("JavaScript", 1000.0), ("Markdown", 10000.0)}  # code and docs differ
    assert {r["threshold"] for r in thresholds if r["rule"] == "data_bytes_max" and r["lang"] == "Python"} == {None}
    scores = table(a, "filter_scores")
    for name, rule in rules.items():
        bins = [r for r in scores if r["rule"] == name]
        assert sum(r["dropped"] for r in bins) == rule["dropped"], name
        assert sum(r["kept"] for r in bins) == sum(
            r["kept"] for r in thresholds if r["rule"] == name and r["threshold"] is not None), name
        if rule["column"].endswith("_frac"):
            assert bins[0]["bin_lo"] == 0.0 and bins[-1]["bin_hi"] == 1.0, name
        labels = [r["label"] for r in bins]
        assert len(set(labels)) == len(labels), (name, labels)  # no constant axis


# --- every table recomputed from the stage outputs, drop logs and shards with polars -------------------


def parts(run_dir: Path, stage: str, sub: str = "") -> pl.DataFrame:
    d = schema.RunPaths(run_dir).stage_dir(stage) / sub
    files = sorted(d.glob("part-*.parquet"))
    frames = [pl.read_parquet(f) for f in files]
    return pl.concat([f for f in frames if f.height], how="diagonal_relaxed") if any(f.height for f in frames) else (
        frames[0] if frames else pl.DataFrame())


def shard_counts(set_dir: Path) -> tuple[int, int, int]:
    """(shards, tokens, documents) of a set, read from its files: tokens from the .bin/.idx by
    megatron-core, documents (every copy) as the segments that start one in the segment tables."""
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    prefixes = sorted(p.with_suffix("") for p in set_dir.glob("part-*.idx"))
    tokens = 0
    for prefix in prefixes:
        ds = IndexedDataset(str(prefix))  # held while its memory map is read
        tokens += int(ds.sequence_lengths.sum())
    segments = pl.concat([pl.read_parquet(f"{prefix}{schema.SEGMENTS_SUFFIX}") for prefix in prefixes])
    return len(prefixes), tokens, segments.filter(pl.col(schema.SEG_DOC_OFFSET) == 0).height


def test_funnel_recomputed_from_the_parts_and_logs(runs):
    a, _ = runs
    got = {(r["stage"], r["set"]): r for r in table(a, "funnel")}
    previous = None
    for stage in STAGES:
        out, dropped = parts(a, stage), parts(a, stage, "_dropped")
        out = out if out.columns else previous  # pack writes token shards, not parts: every row goes on
        docs_in = out.height + dropped.height if previous is None else previous.height
        bytes_out, bytes_dropped = int(out["bytes"].sum()), int(dropped["bytes"].sum()) if dropped.height else 0
        bytes_in = bytes_out + bytes_dropped if previous is None else int(previous["bytes"].sum())
        r = got[(stage, None)]
        assert (r["docs_in"], r["docs_out"], r["docs_dropped"]) == (docs_in, out.height, dropped.height), stage
        assert (r["bytes_out"], r["bytes_dropped"]) == (bytes_out, bytes_dropped), stage
        if previous is not None:
            assert r["bytes_in"] == bytes_in, stage
            assert r["bytes_in"] + r["bytes_changed"] == r["bytes_out"] + r["bytes_dropped"], stage
        if stage == "tokenize":
            assert r["tokens_out"] == int(out["num_tokens"].sum())
        previous = out
    skipped = pl.read_parquet(schema.RunPaths(a).skipped_dir("ingest") / "*.parquet")
    assert got[("ingest", None)]["skipped_entries"] == skipped.height > 0
    assert dict(skipped.group_by("reason").len().iter_rows()) == {
        (r["reason"]): r["entries"] for r in table(a, "skipped_entries")} == {"skipped_dir": 1, "symlink": 1}
    for name in ("long", "mixed", "plain"):
        _, tokens, documents = shard_counts(schema.RunPaths(a).set_dir(name))
        assert (got[("pack", name)]["tokens_out"], got[("pack", name)]["docs_out"]) == (tokens, documents), name


def test_mix_drops_dedup_lengths_recomputed(runs):
    a, _ = runs
    mix = table(a, "mix_by_stage")
    for stage in STAGES[:-1]:
        out = parts(a, stage)
        agg = out.group_by("lang").agg(pl.len().alias("docs"), pl.col("bytes").sum(),
                                       (pl.col("num_tokens").sum() if "num_tokens" in out.columns else pl.lit(0)))
        want = {r[0]: [r[1], r[2], r[3]] for r in agg.iter_rows()}
        assert {r["lang"]: [r["docs"], r["bytes"], r["tokens"] or 0] for r in mix
                if (r["stage"], r["side"]) == (stage, "out")} == want, stage
    logs = pl.concat([parts(a, s, "_dropped") for s in STAGES if parts(a, s, "_dropped").height])
    want = {(r[0], r[1], r[2]): (r[3], r[4]) for r in
            logs.group_by("stage", "reason", "lang").agg(pl.len(), pl.col("bytes").sum()).iter_rows()}
    assert {(r["stage"], r["reason"], r["lang"]): (r["docs"], r["bytes"]) for r in table(a, "drops")} == want
    dedup_in, dedup_log = parts(a, "filters"), parts(a, "dedup", "_dropped")
    dups = dict(dedup_log.group_by("lang").len().iter_rows())
    assert {r["lang"]: (r["docs_in"], r["duplicates"]) for r in table(a, "dedup_by_lang")} == {
        lang: (n, dups.get(lang, 0)) for lang, n in dedup_in.group_by("lang").len().iter_rows()}
    kept = parts(a, "dedup")
    sizes = kept.select(pl.col("dup_count").fill_null(1)).group_by("dup_count").len()
    assert {(r["size"], r["clusters"]) for r in table(a, "cluster_sizes")} == set(sizes.iter_rows())
    lengths = table(a, "lengths")
    for metric, stage, col in (("bytes", "ingest", "bytes"), ("bytes", "tokenize", "bytes"),
                               ("tokens", "tokenize", "num_tokens")):
        values = parts(a, stage)[col]
        buckets = (values.clip(lower_bound=1).log(2).floor().cast(pl.Int64)).value_counts()
        want = {2 ** int(k): int(n) for k, n in buckets.iter_rows()}
        mine = {r["bin_lo"]: r["docs"] for r in lengths if (r["metric"], r["stage"]) == (metric, stage) and r["docs"]}
        assert mine == want, (metric, stage)


def test_sets_and_long_context_recomputed_from_the_shards(runs):
    a, _ = runs
    paths = schema.RunPaths(a)
    for r in table(a, "sets"):
        shards, tokens, documents = shard_counts(paths.set_dir(r["set"]))
        assert (r["shards"], r["tokens"], r["documents"]) == (shards, tokens, documents), r["set"]
    plan = table(a, "mix_plan")
    assert sum(r["achieved_tokens"] for r in plan) == shard_counts(paths.set_dir("mixed"))[1]
    long_rows = [r for r in table(a, "long_context") if r["set"] == "long"]
    docs = [r for r in long_rows if r["key"] == "document_tokens_histogram"]
    assert sum(r["value"] for r in docs) == shard_counts(paths.set_dir("long"))[2]
    for key in ("document_tokens_histogram", "sequence_tokens_histogram"):
        powers = [int(r["bucket"].rsplit("^", 1)[1]) for r in long_rows if r["key"] == key]
        assert powers == list(range(powers[0], powers[-1] + 1)), key  # empty buckets are shown


def test_lengths_plan_and_sets_tables(runs):
    a, _ = runs
    lengths = table(a, "lengths")
    tokens = [r for r in lengths if r["metric"] == "tokens"]
    assert sum(r["docs"] for r in tokens) == stats(a, "tokenize")["rows_out"]
    plan = table(a, "mix_plan")
    manifest = json.loads(schema.RunPaths(a).set_manifest("mixed").read_text())
    assert {r["group"]: r["achieved_tokens"] for r in plan} == {g: v["tokens"] for g, v in manifest["mix"]["achieved"].items()}
    sets = {r["set"]: r for r in table(a, "sets")}
    assert {name: r["kind"] for name, r in sets.items()} == {"long": "long", "mixed": "short", "plain": "short"}
    assert sets["plain"]["tokens"] == stats(a, "tokenize")["tokens_out"]
    assert sets["mixed"]["tokens"] == manifest["totals"]["tokens"]


def test_csv_tables_match_parquet(runs):
    a, _ = runs
    paths = schema.RunPaths(a)
    for name in ("funnel", "mix_by_stage", "drops", "mix_plan"):
        pq_rows = pq.read_table(paths.report_table(name, ".parquet"))
        csv_rows = pacsv.read_csv(paths.report_table(name, ".csv"))
        assert csv_rows.num_rows == pq_rows.num_rows and csv_rows.column_names == pq_rows.column_names


def test_compare_deltas(runs):
    a, b = runs
    drops = {(r["stage"], r["reason"]): r for r in table(a, "compare_drops")}
    assert (drops[("filters", "max_line_len")]["docs_a"], drops[("filters", "max_line_len")]["docs_b"]) == (1, 0)
    for (stage, reason), r in drops.items():
        assert r["docs_a"] == stats(a, stage)["dropped"].get(reason, 0)
        assert r["docs_b"] == stats(b, stage)["dropped"].get(reason, 0)
        assert r["delta"] == r["docs_a"] - r["docs_b"]
    share = table(a, "compare_lang_share")
    for stage in ("filters", "tokenize"):
        langs_a, langs_b = stats(a, stage)["langs_out"], stats(b, stage)["langs_out"]
        n_a, n_b = sum(v[0] for v in langs_a.values()), sum(v[0] for v in langs_b.values())
        mine = [r for r in share if (r["stage"], r["metric"]) == (stage, "docs")]
        assert {r["lang"] for r in mine} == set(langs_a) | set(langs_b)
        for r in mine:
            assert r["share_a"] == pytest.approx(langs_a.get(r["lang"], [0])[0] / n_a)
            assert r["share_b"] == pytest.approx(langs_b.get(r["lang"], [0])[0] / n_b)
        assert abs(sum(r["delta"] for r in mine)) < 1e-9
    page = schema.RunPaths(a).report_compare.read_text()
    assert "<title>codecorpus compare: a (A) vs b (B)</title>" in page  # one recipe name: runs named by directory
    assert schema.RunPaths(b).report_index.exists()  # every run writes its report


def test_report_command(runs, tmp_path):
    a, b = runs
    res = CliRunner().invoke(app, ["report", str(b), "--compare", str(a)])
    assert res.exit_code == 0, res.output
    assert "compare.html" in res.output
    bad = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert bad.exit_code == 2 and "not a run directory" in " ".join(bad.output.split())


# --- the page in a real headless browser ------------------------------------------------------------


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if found := shutil.which(name):
            return found
    pytest.skip("no chromium on PATH: install Debian's `chromium` package (.ci/run does) to render the report")


def render(page: Path, tmp_path: Path) -> tuple[str, str]:
    """The DOM after scripts ran, and Chromium's log (console errors land there)."""
    cmd = [
        chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-extensions", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
        "--virtual-time-budget=5000", "--dump-dom", page.resolve().as_uri(),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


def html_tag(dom: str) -> str:
    """The <html> start tag: where the page records charts drawn and script errors."""
    return re.search(r"<html[^>]*>", dom).group(0)


def charts_of(html: str) -> int:
    return len(re.findall(r'<div class="chart" data-spec=', html))


@pytest.mark.parametrize("page", ["index", "compare"])
def test_report_renders_in_chromium_without_script_errors(runs, tmp_path, page):
    a, _ = runs
    path = schema.RunPaths(a).report_dir / f"{page}.html"
    source = path.read_text()
    assert "http://" not in source.replace("http://www.w3.org/2000/svg", "") and "https://" not in source
    dom, log = render(path, tmp_path)
    expected = charts_of(source)
    assert expected >= (8 if page == "index" else 2)
    assert html_tag(dom) == f'<html lang="en" data-charts-drawn="{expected}">', html_tag(dom)
    assert "Uncaught" not in log, log[-2000:]
    svgs = re.findall(r"<svg[^>]*class=\"chart-svg\".*?</svg>", dom, flags=re.S)
    assert len(svgs) == expected and all("<rect" in s for s in svgs)


def test_browser_check_catches_a_script_error(tmp_path):
    """The checks above can fail: a page with a broken chart spec is caught."""
    page = tmp_path / "broken.html"
    page.write_text(
        f"<!DOCTYPE html><html><head><script>{ERROR_TRAP}</script></head><body>"
        '<script type="application/json" id="spec-0">{"kind": "nope", "metrics": {"x": {}}}</script>'
        f'<div class="chart" data-spec="spec-0"></div><script>{CHARTS_JS}</script></body></html>'
    )
    dom, _ = render(page, tmp_path)
    assert "data-errors=" in html_tag(dom) and "data-charts-drawn" not in html_tag(dom)


def test_report_of_a_partial_run_degrades(runs, tmp_path):
    """A run stopped after langid (no filters, dedup, tokens, sets): every section still renders."""
    a, _ = runs
    part = tmp_path / "partial"
    part.mkdir()
    shutil.copy(a / "recipe.yaml", part / "recipe.yaml")
    for stage in ("ingest", "langid"):
        shutil.copytree(a / stage, part / stage)
    write_report(part)
    paths = schema.RunPaths(part)
    assert [r["stage"] for r in table(part, "funnel")] == ["ingest", "langid"]
    for name in ("mix_plan", "sets", "filter_scores", "dedup_by_lang", "long_context"):
        assert table(part, name) == [], name
    page = paths.report_index.read_text()
    assert "no output set has a mix: section" in page and "this run has no dedup stage output" in page
    assert not paths.report_compare.exists()


def test_report_of_a_recipe_this_version_cannot_load(runs, tmp_path, caplog):
    """A recipe.yaml another version wrote (a stage this one does not know): the report keeps the
    file's stage order, and the log says why."""
    a, _ = runs
    other = tmp_path / "other"
    other.mkdir()
    data = yaml.safe_load((a / "recipe.yaml").read_text())
    data["stages"]["from_a_later_version"] = {"threshold": 1}
    (other / "recipe.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    for stage in ("ingest", "langid"):
        shutil.copytree(a / stage, other / stage)
    with caplog.at_level(logging.WARNING, logger="codecorpus.reports.run"):
        write_report(other)
    assert [r["stage"] for r in table(other, "funnel")] == ["ingest", "langid"]
    assert "from_a_later_version" in caplog.text and "in the file's order" in caplog.text


def test_report_bytes_do_not_depend_on_the_process(runs, tmp_path):
    """Same run, two interpreters with different string hashing: byte-identical report files."""
    import os
    import sys

    a, _ = runs
    outputs = []
    for seed in ("1", "2"):
        copy = tmp_path / f"copy{seed}"
        shutil.copytree(a, copy, ignore=shutil.ignore_patterns("report"))
        env = {**os.environ, "PYTHONHASHSEED": seed}
        code = f"from codecorpus.reports.build import write_report; write_report({str(copy)!r})"
        subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300)
        outputs.append({p.name: p.read_bytes() for p in sorted((copy / "report").iterdir())})
    assert outputs[0].keys() == outputs[1].keys() and "index.html" in outputs[0]
    assert [k for k in outputs[0] if outputs[0][k] != outputs[1][k]] == []
