"""Repository history -> commits, editing sets, SWE-style task candidates.

The stages, in pipeline order (each a module with a pure function and a config
model from :mod:`codecorpus.tasks.config`)::

    commits          plan_slices -> read_slice      (source: one streamed git log per slice)
    commit_filters   filters.run                    (CommitPackFT's rules: annotate or filter)
    commit_dedup     dedup.run                      (git patch-id --stable, MinHash of the diff)
    task_candidates  candidates.run                 (tests + code -> patch / test_patch)
    edit_set         edits.run                      (trace rows for sft_render)
    task files       swebench.write_task_files      (tasks.jsonl, time split)

Column names and the commit row's Arrow schema live in :mod:`codecorpus.tasks.columns`.
"""
