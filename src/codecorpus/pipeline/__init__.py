"""Stages as data: the stage spec, the pipelines, the Ray-free job bodies, and stages from a recipe.

    spec.py       StageSpec (name, kind, config, jobs, hash) and Job
    pipelines.py  PRETRAIN, SFT, REPO_TASKS, REPO_ENVS: ordered tuples of the parts' specs, the
                  one list of stages (the recipe's stages model, order and checks derive from it)
    bodies.py     job bodies every kind shares: map, scatter, reduce, apply; markers and stats
    config.py     a user's own stage in a recipe (use:, kind:, after:, config:)
    user.py       such a stage as a spec, its contract and its checks
    datatrove.py  datatrove filters as stages (the [datatrove] extra)
"""
