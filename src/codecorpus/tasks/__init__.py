"""Repository history -> commits, editing sets, SWE-style task candidates.

The stages, in pipeline order (each a module with a pure function and a config
model from :mod:`codecorpus.tasks.config`)::

    commits          plan_slices -> read_slice      (source: one streamed git log per slice; merges on
                                                     the mainline are changes; github.py: the metadata)
    commit_filters   filters.run                    (CommitPackFT's rules, the edit set's: annotate or filter)
    commit_dedup     dedup.run                      (git patch-id --stable, MinHash of the diff)
    task_candidates  candidates.run                 (reads commits: changes with tests + code -> patch /
                                                     test_patch, the statement, git apply --check)
    edit_set         edits.run_training             (trace rows for sft_render; evaluation commits held out)
    task_outputs     unique -> swebench.task_records (exact duplicate tasks dropped; tasks.jsonl,
                                                     tasks-eval.jsonl; the edit set packed)

The specs are in :mod:`codecorpus.tasks.spec`, the job bodies in :mod:`codecorpus.tasks.bodies`,
the commits source's plan in :mod:`codecorpus.tasks.plan`.

Column names and the commit row's Arrow schema live in :mod:`codecorpus.tasks.columns`.
"""
