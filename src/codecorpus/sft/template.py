"""Chat templates: which one a recipe uses, its hash, and rendering a conversation with it.

Order of choice: ``sft_render.chat_template`` (a Jinja file), else the
tokenizer's own template (``chat_template`` in the ``tokenizer_config.json``
beside a ``tokenizer.json``), else the built-in ChatML template below. The
template text's sha256 goes into the set manifest.

Templates run in Jinja's immutable sandbox with the conventions of HF
``transformers`` (``trim_blocks``, ``lstrip_blocks``, loop controls, a ``tojson``
that keeps non-ASCII, ``raise_exception``), and messages are passed in the shape
HF templates expect: ``reasoning_content``, ``tool_calls`` as
``{id, type, function: {name, arguments}}`` with arguments parsed to an object.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import jinja2.sandbox

from codecorpus.model import RecipeError
from codecorpus.sft.config import SftRenderConfig
from codecorpus.tokenize.config import TokenizerConfig

BUILTIN_CHATML = (
    "{%- set ns = namespace(start=0) -%}\n"
    "{%- if messages and messages[0].role == 'system' -%}{%- set ns.start = 1 -%}{%- endif -%}\n"
    "{%- if tools -%}\n"
    "{{- '<|im_start|>system\\n' -}}\n"
    "{%- if ns.start == 1 -%}{{- messages[0].content + '\\n\\n' -}}{%- endif -%}\n"
    "{{- '# Tools\\n\\nYou may call functions. Their signatures, one JSON object a line:\\n<tools>\\n' -}}\n"
    "{%- for tool in tools -%}{{- tool | tojson -}}{{- '\\n' -}}{%- endfor -%}\n"
    "{{- '</tools>\\n\\nCall a function with:\\n<tool_call>\\n{\"name\": NAME, \"arguments\": ARGS}\\n"
    "</tool_call><|im_end|>\\n' -}}\n"
    "{%- elif ns.start == 1 -%}\n"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' -}}\n"
    "{%- endif -%}\n"
    "{%- for message in messages[ns.start:] -%}\n"
    "{%- if message.role == 'assistant' -%}\n"
    "{{- '<|im_start|>assistant\\n' -}}\n"
    "{%- if message.reasoning_content -%}"
    "{{- '<think>\\n' + message.reasoning_content + '\\n</think>\\n\\n' -}}{%- endif -%}\n"
    "{{- message.content -}}\n"
    "{%- for call in message.tool_calls or [] -%}\n"
    "{%- if message.content or not loop.first -%}{{- '\\n' -}}{%- endif -%}\n"
    "{{- '<tool_call>\\n' + ({'name': call.function.name, 'arguments': call.function.arguments} | tojson)"
    " + '\\n</tool_call>' -}}\n"
    "{%- endfor -%}\n"
    "{{- '<|im_end|>\\n' -}}\n"
    "{%- else -%}\n"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n"
)
"""ChatML as Qwen2.5 writes it: tools in the system turn, calls as ``<tool_call>`` JSON,
reasoning in ``<think>``, tool results as their own ``tool`` turns."""


class TemplateError(ValueError):
    """A template that fails on a conversation (a per-trace drop, not a crash)."""


@dataclass(frozen=True)
class ChatTemplate:
    source: str
    """builtin, tokenizer or file"""
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def record(self) -> dict[str, str]:
        return {"source": self.source, "sha256": self.sha256}


def _tokenizer_template(tok_cfg: TokenizerConfig | None) -> str | None:
    if tok_cfg is None or tok_cfg.path is None or not tok_cfg.path.endswith(".json"):
        return None
    config = Path(tok_cfg.path).with_name("tokenizer_config.json")
    if not config.is_file():
        return None
    value = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
    if isinstance(value, list):  # named templates: take "default"
        value = next((t.get("template") for t in value if t.get("name") == "default"), None)
    return value if isinstance(value, str) else None


def choose_template(cfg: SftRenderConfig, tok_cfg: TokenizerConfig | None) -> ChatTemplate:
    """The recipe's template file, else the tokenizer's own, else built-in ChatML."""
    if cfg.chat_template is not None:
        path = Path(cfg.chat_template)
        if not path.is_file():
            raise RecipeError(f"sft_render.chat_template: no file at {path}: give a Jinja template file or remove the key")
        return ChatTemplate("file", path.read_text(encoding="utf-8"))
    own = _tokenizer_template(tok_cfg)
    if own is not None:
        return ChatTemplate("tokenizer", own)
    return ChatTemplate("builtin", BUILTIN_CHATML)


def _raise(message: str) -> None:
    raise TemplateError(message)


def _tojson(value: Any, indent: int | None = None, separators: Any = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)


@functools.lru_cache(maxsize=8)
def compile_template(text: str) -> jinja2.Template:
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    try:
        return env.from_string(text)
    except jinja2.TemplateSyntaxError as err:
        raise RecipeError(f"chat template does not compile: {err} (line {err.lineno})") from None


def hf_message(m: dict[str, Any]) -> dict[str, Any]:
    """A canonical message in the shape HF chat templates read."""
    out: dict[str, Any] = {"role": m["role"], "content": m["content"]}
    if m.get("reasoning"):
        out["reasoning_content"] = m["reasoning"]
    if m.get("tool_calls"):
        out["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": json.loads(c["arguments"])}}
            for c in m["tool_calls"]
        ]
    if m.get("tool_call_id"):
        out["tool_call_id"] = m["tool_call_id"]
    if m.get("name"):
        out["name"] = m["name"]
    return out


def render(template: jinja2.Template, messages: list[dict[str, Any]], tools: list | None, add_generation_prompt: bool = False) -> str:
    """The template's text for these canonical messages."""
    try:
        return template.render(
            messages=[hf_message(m) for m in messages], tools=tools,
            add_generation_prompt=add_generation_prompt, bos_token="", eos_token="",
        )
    except (jinja2.TemplateError, TypeError, ValueError, KeyError) as err:
        raise TemplateError(f"{type(err).__name__}: {err}") from None
