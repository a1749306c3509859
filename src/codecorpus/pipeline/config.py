"""Config of a user's own stage in a recipe: ``stages.<name>: {use: ..., kind: ..., after: ...}``.

    stages:
      my_quality: {use: "mypkg.quality:score", kind: annotator, after: filters, config: {model: q.bin}}
      gopher_rep: {use: "datatrove.pipeline.filters:GopherRepetitionFilter", kind: filter, after: filters}

``use`` names a function (or a datatrove filter class) as ``module:attribute``; ``config``
is passed to it as keyword arguments. What it must return is in ``pipeline/user.py``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from codecorpus.model import Model


class UserStageConfig(Model):
    """A stage of the user's own, run under the same contract as a built-in one."""

    use: str = Field(
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
        description="module:function (or module:DatatroveFilterClass), importable on every worker",
    )
    kind: Literal["annotator", "filter"] = Field(
        description="annotator: returns new columns; filter: returns a drop reason per row (null keeps it)"
    )
    after: str = Field(description="the stage it follows: a pretraining stage before tokenize, or another user stage")
    config: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the function")


def insert_user_stages(builtin: list[str], user: dict[str, UserStageConfig]) -> list[str]:
    """The built-in stage names with each user stage placed right after the stage it names
    (user stages after the same stage keep their recipe order).

    >>> cfg = lambda after: UserStageConfig(use="m:f", kind="filter", after=after)
    >>> insert_user_stages(["ingest", "filters", "tokenize"], {"a": cfg("filters"), "b": cfg("a"), "c": cfg("filters")})
    ['ingest', 'filters', 'a', 'b', 'c', 'tokenize']
    """
    out = list(builtin)
    placed: set[str] = set()
    pending = dict(user)
    while pending:
        progressed = False
        for name, cfg in list(pending.items()):
            if cfg.after in out:
                anchor = out.index(cfg.after)
                while anchor + 1 < len(out) and out[anchor + 1] in placed and _follows(out[anchor + 1], cfg.after, user):
                    anchor += 1
                out.insert(anchor + 1, name)
                placed.add(name)
                del pending[name]
                progressed = True
        if not progressed:
            return out  # the rest name missing anchors: the recipe check reports them
    return out


def _follows(name: str, anchor: str, user: dict[str, UserStageConfig]) -> bool:
    """True if ``name`` sits (directly or through other user stages) after ``anchor``."""
    seen = set()
    while name in user and name not in seen:
        seen.add(name)
        if user[name].after == anchor:
            return True
        name = user[name].after
    return False
