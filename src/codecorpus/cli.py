"""The ``codecorpus`` command: run a recipe, verify, show and export manifests, inspect shards,
write reports, train a tokenizer, grade predictions."""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from codecorpus.recipe_file import RecipeError
from codecorpus.runtime import name_local_ray_auth

# Nothing heavier at the top (the recipe's models, pyarrow): ``run`` starts Ray before it imports them.

if TYPE_CHECKING:
    from codecorpus.config import Recipe
    from codecorpus.recipe_file import LocalStart
    from codecorpus.runtime.executor import RunResult

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
manifest_app = typer.Typer(no_args_is_help=True, help="Verify or show a run, set or manifest.json.")
app.add_typer(manifest_app, name="manifest")
console = Console(stderr=True)
out = Console(width=None if sys.stdout.isatty() else 120)


def _fail(message: str, code: int = 2) -> None:
    console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


@app.command()
def run(
    recipe: Annotated[Path, typer.Argument(help="recipe YAML, e.g. pipelines/quickstart.yaml")],
    out_dir: Annotated[
        str | None, typer.Option("--out", help="run directory, local or s3://BUCKET/PREFIX (default: the recipe's out)")
    ] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="override: stage.key=value (repeatable)")] = None,
    until: Annotated[str | None, typer.Option(help="run the stages up to and including this one")] = None,
    only: Annotated[str | None, typer.Option(help="run this stage alone (upstream must be complete)")] = None,
    workers: Annotated[int | None, typer.Option(
        help="local Ray CPUs (default: recipe, else all cores); with --ray-address, the most tasks the run keeps at once")] = None,
    ray_address: Annotated[str | None, typer.Option(help="join an existing Ray cluster at this address")] = None,
    quiet: Annotated[bool, typer.Option(help="no progress bars")] = False,
) -> None:
    """Run a pipeline recipe; rerunning the same command resumes it."""
    if ray_address is None:
        name_local_ray_auth()
    from codecorpus.recipe_file import read_recipe_file
    from codecorpus.runtime.launch import start
    from codecorpus.runtime.session import PipelineError, stop_ray_in_background

    def prepare(data: dict[str, Any]) -> tuple[Recipe, Path]:
        from codecorpus.config import load_recipe
        from codecorpus.pipeline.pipelines import check_stages
        from codecorpus.preflight import check_recipe_inputs

        cfg = load_recipe(recipe, set_ or [], data)
        check_recipe_inputs(cfg)  # every named path exists
        check_stages(cfg)  # every stage of the user's own imports and fits its contract
        return cfg, _run_dir(out_dir or cfg.out)  # an S3 run dir before Ray starts: workers inherit the store

    try:
        data = read_recipe_file(recipe)
        early = None if ray_address else _local_start(data, set_ or [], out_dir)
        if early is not None:  # Ray's processes start at once; the recipe validates and plans beside them
            prepared, cpus = functools.partial(prepare, data), workers or early.cpus
        else:  # a joined cluster, an S3 run dir, or a recipe whose workers/out validation must see first
            cfg, run_dir = prepare(data)
            prepared, cpus = (lambda: (cfg, run_dir)), workers or cfg.workers
        before_ray, launched = process_seconds(), time.perf_counter()
        executor = start(prepared, cpus, ray_address, console=console, quiet=quiet, only=only, until=until)
        result = executor.run_pipeline(only=only, until=until)
    except (RecipeError, PipelineError) as err:
        _fail(str(err))
    # the report reads files only: a Ray this call started stops meanwhile (``ray.shutdown``)
    finished = time.perf_counter()
    stopping = stop_ray_in_background() if executor.owns_ray else None
    report_seconds = write_run_report(executor.run.root, quiet)
    print_summary(result)
    print_env_verdicts(executor.run.root)
    resumed = resume_line(result)
    if resumed:
        console.print(resumed, highlight=False)
    if stopping is not None:
        stopping.result()
    if not quiet:
        start_up = before_ray + (finished - result.seconds - launched)  # until the pipeline began
        print_timing(result, before_ray, start_up, time.perf_counter() - finished, report_seconds)


def resume_line(result) -> str | None:
    """What a resumed run skipped: jobs whose completion marker held the current stage hash."""
    skipped = [(st.name, st.skipped_jobs, st.skipped_jobs + st.ran_jobs) for st in result.stages]
    total_skipped = sum(s for _, s, _ in skipped)
    if not total_skipped:
        return None
    total = sum(t for _, _, t in skipped)
    per_stage = ", ".join(f"{name} {s}/{t}" for name, s, t in skipped if s)
    return (
        f"resumed: {total_skipped} of {total} shards were already complete under this recipe and "
        f"were skipped ({per_stage})"
    )


def print_env_verdicts(run_dir: Path) -> None:
    """An environments run's verdict per repository version: verified or the drop reason,
    tests passed and failed, wall time (nothing for a run without ``env_verify``)."""
    from codecorpus.reports.envs import verdict_lines

    try:
        lines = verdict_lines(Path(run_dir))
    except (OSError, ValueError) as err:  # the run is complete; only this listing failed
        console.print(f"[red]verdicts unreadable:[/] {err}", highlight=False)
        return
    for line in lines:
        console.print(line, highlight=False, markup=False)


def write_run_report(run_dir: Path, quiet: bool = False) -> float | None:
    """RUN/report/ of what the run holds, after the run; a failure here never loses the run.

    Returns the seconds it took, or None when it failed.
    """
    from codecorpus import schema
    from codecorpus.reports import build

    t0 = time.perf_counter()
    try:
        build.write_report(run_dir)
    except (OSError, ValueError, KeyError, TypeError) as err:
        console.print(
            f"[red]report failed:[/] {type(err).__name__}: {err}; the run itself is complete: "
            f"rerun `codecorpus report {run_dir}` once fixed", highlight=False,
        )
        return None
    seconds = time.perf_counter() - t0
    if not quiet:
        console.print(f"report: {schema.RunPaths(run_dir).report_index} ({seconds:.1f} s)")
    return seconds


def process_seconds() -> float:
    """Seconds since this process started (interpreter start and imports included); 0 where unknown."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)


def print_timing(result: RunResult, before_ray: float, start_up: float, end: float,
                 report_seconds: float | None) -> None:
    """Where the wall time went, from the process's start until Ray has stopped.

    ``start_up`` runs until the pipeline begins: what the command did before Ray's start
    (``before_ray``: the interpreter, imports, reading the recipe, and its validation where it
    must come first; 0 where the process's start time is unknown), Ray's start, and what the
    driver still had to do after it (the recipe's plan and the shared task modules run beside Ray's
    start; the pipeline waits for the later of the two). A stage's share outside tasks is its
    wall time less its task seconds spread over the run's CPUs (scheduling, barriers waiting on
    the last task, reading results); the stages' total is the pipeline's wall time less all
    their task seconds over the CPUs, its own checks before the first stage included. ``end`` is
    the report, the summary and Ray's stop (``ray.shutdown``, beside the report). The parts add up to the wall time less the task
    seconds over the CPUs, as ``bench/e2e_vs_datatrove.py`` measures it from outside the process.
    """
    cpus = max(result.cpus, 1)
    lines = [f"time on {cpus} CPUs, start-up {start_up:.1f} s (before Ray {before_ray:.1f}, Ray "
             f"{result.ray_seconds:.1f}, plan {result.plan_seconds:.1f} beside it):"]
    # over the whole pipeline (its checks before the first stage included); shown as 0 when below it
    stages_outside = max(result.seconds - sum(st.task_seconds for st in result.stages) / cpus, 0.0)
    for st in result.stages:
        outside = max(st.seconds - st.task_seconds / cpus, 0.0)
        share = outside / st.seconds if st.seconds > 0 else 0.0
        lines.append(f"  {st.name:<14}{st.seconds:7.1f} s wall{st.task_seconds:8.1f} task-s{st.cpu_seconds:7.1f} CPU-s"
                     f"{share:6.0%} outside")
    total_outside = start_up + stages_outside + end
    lines.append(f"  outside tasks: {total_outside:.1f} s (start-up {start_up:.1f}, stages {stages_outside:.1f}, "
                 f"end {end:.1f} with the report {report_seconds or 0.0:.1f})")
    for line in lines:
        console.print(line, highlight=False, markup=False)


def _local_start(data: dict[str, Any], overrides: list[str], out_dir: str | None) -> LocalStart | None:
    """The recipe's settings for a local Ray started before the recipe validates; None when the
    recipe must validate first: a run directory on S3 (Ray's workers inherit its store from the
    driver) or a ``workers`` / ``out`` that is not a plain value (``recipe_file``)."""
    from codecorpus.recipe_file import local_start_settings

    early = local_start_settings(data, overrides)
    return None if early is None or _on_s3(out_dir or early.out or "") else early


def _on_s3(location: str) -> bool:
    """Whether a run location names an S3 run directory (``storage/mirror.py`` checks its form)."""
    return location.startswith("s3://")


def _run_dir(location: str) -> Path:
    """A local run directory, or the local mirror of an S3 one (``storage/mirror.py``)."""
    if _on_s3(location):
        from codecorpus.storage import mirror as store

        try:
            return Path(store.activate(location).local_root)
        except ValueError as err:
            _fail(str(err))
    return Path(location)


def _local_view(path: str) -> Path:
    """For verify/show of an S3 run: fetch its manifests and shards into the mirror first."""
    if not _on_s3(path):
        return Path(path)
    from codecorpus import schema
    from codecorpus.storage import mirror as store

    root = _run_dir(path)
    store.ensure_local(schema.RunPaths(root).manifest)
    store.sync_down(root / schema.SETS_DIR)
    return root


def print_summary(result) -> None:
    """One row per stage, and one per output set with the tokens its shards hold.

    A stage that writes sets (``StageSpec.writes_sets``, e.g. pack) reads each document once
    but writes it into every set, copies included (mixture upsampling, long-context
    repetition), so its tokens are shown per set from the set manifests, never as one stage
    figure.
    """
    from rich.table import Table  # after the run: not imported before Ray starts

    from codecorpus.pipeline.pipelines import set_stages

    writes_sets = set_stages()
    table = Table(title=f"codecorpus run: {result.run_dir}  ({result.seconds:.1f} s)")
    for col in ("stage", "shards", "docs in", "docs out", "dropped", "skipped", "MB in", "MB out", "tokens",
                "seconds"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    last = None
    for st in result.stages:
        s = st.stats
        dropped = sum(s["dropped"].values())
        skipped = sum(s.get("skipped_entries", {}).values())
        tokens = "" if st.name in writes_sets else f"{s['tokens_out'] or s['tokens_in']:,}"
        table.add_row(
            st.name, str(s["shards"]), f"{s['rows_in']:,}", f"{s['rows_out']:,}", f"{dropped:,}", f"{skipped:,}",
            f"{s['bytes_in'] / 1e6:.1f}", f"{s['bytes_out'] / 1e6:.1f}", tokens, f"{st.seconds:.1f}",
        )
        if st.name in writes_sets:
            for name, totals in _set_totals(result.run_dir).items():
                table.add_row(f"  set {name}", "", "", f"{totals.get('documents', 0):,}", "", "", "", "",
                              f"{totals.get('tokens', 0):,}", "")
        last = s
    out.print(table)
    cut = {k.split("/", 1)[1]: v for st in result.stages if st.name == "commits"
           for k, v in st.stats.get("counters", {}).items() if k.startswith("changes_left_out/")}  # fmt: skip
    if cut:  # a bound of the commits walk cut these histories (issue 38): say so
        out.print("changes left out by a bound (since / until / max_commits_per_repo): "
                  + ", ".join(f"{repo} {n:,}" for repo, n in sorted(cut.items())))  # fmt: skip
    if last and last["langs_out"]:
        langs = Table(title="top languages (final stage)")
        for col in ("language", "docs", "MB", "tokens"):
            langs.add_column(col, justify="left" if col == "language" else "right")
        ranked = sorted(last["langs_out"].items(), key=lambda kv: (-kv[1][1], kv[0]))[:12]
        for lang, (docs, nbytes, tokens) in ranked:
            langs.add_row(lang, f"{docs:,}", f"{nbytes / 1e6:.2f}", f"{tokens:,}")
        out.print(langs)


def _set_totals(run_dir: Path) -> dict[str, dict]:
    """Each output set's totals as its manifest records them (tokens counted from the shards)."""
    import json

    from codecorpus import schema

    path = schema.RunPaths(Path(run_dir)).manifest
    if not path.is_file():
        return {}
    sets = json.loads(path.read_text()).get("sets", {})
    return {name: entry.get("totals", {}) for name, entry in sorted(sets.items())}


@manifest_app.command("verify")
def manifest_verify(
    path: Annotated[str, typer.Argument(help="run dir (or s3:// run), set dir or manifest.json")],
    split: Annotated[
        str | None, typer.Option(help="a Megatron --split (e.g. 969,30,1): fail if a shard leaves one of its splits empty")
    ] = None,
) -> None:
    """Re-hash every shard and re-count tokens and documents; exit 1 on any mismatch."""
    from codecorpus.manifests.manifest import split_notes, verify
    from codecorpus.manifests.splits import split_matrix

    if split is not None:
        try:
            split_matrix(split)
        except ValueError as e:
            _fail(f"--split: {e}")
    path = _local_view(path)
    problems = verify(path, split)
    for note in split_notes(path):
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    if problems:
        for p in problems:
            console.print(f"[red]MISMATCH[/] {p}", highlight=False)
        console.print(f"[bold red]{len(problems)} problem(s) in {path}[/]")
        raise typer.Exit(1)
    out.print(f"OK: {path} verified")


@manifest_app.command("show")
def manifest_show(path: Annotated[str, typer.Argument(help="run dir (or s3:// run), set dir or manifest.json")]) -> None:
    """Print a readable summary of a manifest."""
    from codecorpus.manifests.manifest import show

    path = _local_view(path)
    out.print(show(path), highlight=False)


@app.command()
def inspect(
    shard_prefix: Annotated[Path, typer.Argument(help="shard path without suffix, e.g. RUN/shards/short-8k/part-00000")],
    decode: Annotated[int, typer.Option("--decode", help="index of the packed sequence to print")] = 0,
) -> None:
    """Print one packed sequence decoded, with document boundaries marked."""
    from codecorpus.manifests.inspect import render_sequence

    try:
        out.print(render_sequence(shard_prefix, decode), highlight=False, markup=False)
    except (FileNotFoundError, IndexError, ValueError) as err:
        _fail(str(err))


# --- tokenizer training and the datatrove export ------------------------------

tokenizer_app = typer.Typer(no_args_is_help=True, help="Train the run's tokenizer on its own.")
app.add_typer(tokenizer_app, name="tokenizer")


@tokenizer_app.command("train")
def tokenizer_train(
    recipe: Annotated[Path, typer.Argument(help="recipe YAML whose tokenizer has train: settings")],
    out_dir: Annotated[
        str | None, typer.Option("--out", help="run directory, local or s3://BUCKET/PREFIX (default: the recipe's out)")
    ] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="override: stage.key=value (repeatable)")] = None,
    workers: Annotated[int | None, typer.Option(help="local Ray CPUs")] = None,
    quiet: Annotated[bool, typer.Option(help="no progress bars")] = False,
) -> None:
    """Run the stages before tokenize, then train RUN/tokenizer/tokenizer.json on a deterministic sample."""
    name_local_ray_auth()
    from codecorpus.config import load_recipe
    from codecorpus.runtime.executor import Executor, PipelineError, init_ray
    from codecorpus.tokenize.spec import run_tokenizer

    try:
        cfg = load_recipe(recipe, set_ or [])
        if cfg.tokenizer is None or cfg.tokenizer.train is None or cfg.stages.tokenize is None:
            _fail(f"{recipe}: tokenizer train needs stages.tokenize and a `tokenizer: {{train: ...}}` section")
        init_ray(workers or cfg.workers, None)
        executor = Executor(cfg, out_dir or Path(cfg.out), console=console, quiet=quiet)
        upstream = executor.upstream_of("tokenize")
        executor.run_pipeline(until=upstream)
        trained = run_tokenizer(executor.stage_run("tokenize"))
    except (RecipeError, PipelineError) as err:
        _fail(str(err))
    out.print(f"trained tokenizer: {trained.path}")


@manifest_app.command("export-datatrove")
def manifest_export_datatrove(
    set_dir: Annotated[Path, typer.Argument(help="a set directory, e.g. RUN/shards/short-8k")],
    dest: Annotated[Path, typer.Argument(help="folder for the .ds/.ds.index/.ds.loss files")],
) -> None:
    """Write the set in datatrove's tokenized-folder format, one seq_len+1 window per packed sequence."""
    from codecorpus.manifests.datatrove import export_datatrove

    try:
        paths = export_datatrove(set_dir, dest)
    except (FileNotFoundError, ValueError) as err:
        _fail(str(err))
    out.print(f"wrote {len(paths)} .ds file(s) to {dest}")


@manifest_app.command("export-hf")
def manifest_export_hf(
    set_dir: Annotated[Path, typer.Argument(help="an SFT or edit set directory, e.g. RUN/shards/sft")],
    dest: Annotated[Path, typer.Argument(help="new folder for data/train-*.parquet and codecorpus-export.json")],
    per_example: Annotated[bool, typer.Option(
        "--per-example", help="one row per example instead of one per packed sequence")] = False,
    all_ones_mask: Annotated[bool, typer.Option(
        "--all-ones-mask", help="export a set without loss masks (pretraining) with every token trained")] = False,
    id_dtype: Annotated[str, typer.Option(help="Arrow type of input_ids: int32, int64, uint16 or uint32")] = "int32",
) -> None:
    """Write the set as Parquet that datasets' load_dataset and TRL's SFTTrainer read (docs/manifests-hf.md)."""
    from codecorpus.manifests.hf import ExportError, export_hf

    try:
        sidecar = export_hf(set_dir, dest, per_example=per_example, all_ones_mask=all_ones_mask, id_dtype=id_dtype)
    except (ExportError, FileNotFoundError) as err:
        _fail(str(err))
    c = sidecar["counts"]
    out.print(f"wrote {c['rows']:,} rows ({sidecar['mode']}), {c['tokens']:,} tokens, {c['loss_tokens']:,} loss "
              f"tokens in {len(sidecar['files'])} file(s) to {dest}")
    if c["trained_segment_starts"]:
        console.print(f"[yellow]note:[/] {c['trained_segment_starts']:,} segment(s) train their first token "
                      "(train_on_system); TRL's padding-free collator never trains a segment's first token, "
                      f"so it trains {c['loss_tokens'] - c['trained_segment_starts']:,} loss tokens", highlight=False)


# --- report ------------------------------------------------------------------


@app.command()
def report(
    location: Annotated[str, typer.Argument(help="a run directory, e.g. runs/quickstart, or s3://BUCKET/PREFIX")],
    compare: Annotated[Path | None, typer.Option("--compare", help="another run: write report/compare.html")] = None,
) -> None:
    """Write RUN/report/: index.html (charts + tables, self-contained) and long-form Parquet/CSV tables."""
    from codecorpus import schema
    from codecorpus.reports.build import write_report
    from codecorpus.storage import mirror as store

    run_dir = _run_dir(location)  # an S3 run is read from its bucket, the report published to it
    for path, named in ((run_dir, location), (compare, compare)):
        if path is not None and not store.exists(schema.RunPaths(path).recipe):
            _fail(f"{named} is not a run directory (no recipe.yaml): pass the --out of a codecorpus run")
    t0 = time.perf_counter()
    pages = write_report(run_dir, compare)
    for page in pages:
        out.print(f"wrote {page}")
    out.print(f"report took {time.perf_counter() - t0:.2f} s")


@app.command()
def evaluate(
    rl_manifest: Annotated[Path, typer.Argument(help="an environments run's manifest.json (RL manifest)")],
    predictions: Annotated[Path, typer.Argument(help="SWE-bench predictions JSONL: instance_id, model_name_or_path, model_patch")],
    out_dir: Annotated[Path, typer.Option("--out", help="report directory (rerun to resume)")] = Path("evaluation"),
    workers: Annotated[int | None, typer.Option(help="sessions at once (default: Ray's CPUs)")] = None,
    ray_address: Annotated[str | None, typer.Option(help="join an existing Ray cluster at this address")] = None,
    flaky_reruns: Annotated[int, typer.Option(help="reruns of a known-flaky graded test that did not pass")] = 2,
) -> None:
    """Grade SWE-bench predictions against an RL manifest's tasks, each patch in its own sandboxed session (docs/rollouts.md)."""
    if ray_address is None:
        name_local_ray_auth()
    from codecorpus.envs.evaluation import evaluate_predictions
    from codecorpus.envs.manifest_tasks import run_cache_dir
    from codecorpus.envs.session import SessionConfig
    from codecorpus.runtime.parallel import map_calls

    if not rl_manifest.is_file() or not predictions.is_file():
        _fail(f"{rl_manifest if not rl_manifest.is_file() else predictions} does not exist")
    cfg = SessionConfig(cache_dir=run_cache_dir(rl_manifest), flaky_reruns=flaky_reruns)
    mapper = functools.partial(map_calls, workers=workers, address=ray_address)
    try:
        report = evaluate_predictions(rl_manifest, predictions, out_dir, cfg, mapper,
                                      progress=lambda line: console.print(line, highlight=False, markup=False))
    except (OSError, ValueError) as err:
        _fail(f"{rl_manifest}: {err}")
    out.print(f"resolved {report['resolved_instances']}, unresolved {report['unresolved_instances']}, "
              f"empty {report['empty_patch_instances']}, errors {report['error_instances']}, "
              f"not gradable {len(report['problems'])}: {out_dir / 'summary.json'}")


def main() -> None:
    """The console entry point: the command, which stops any Ray it started (``ray.shutdown``)
    before it returns; the process then exits as any Python program does."""
    app()
