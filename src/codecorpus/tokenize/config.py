"""Config of the tokenizer (``tokenizer:``), the tokenize stage and FIM (``outputs[i].fim``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from codecorpus.model import Model


class TokenizeConfig(Model):
    batch_size: int = Field(256, gt=0)
    append_eos: bool = True


class TrainTokenizerConfig(Model):
    vocab_size: int = Field(16384, ge=512, le=1_000_000)
    sample_bytes: int = Field(20_000_000, gt=0, description="corpus bytes to train on")
    min_frequency: int = Field(2, ge=1)


class TokenizerConfig(Model):
    """Exactly one of: builtin, path, train."""

    builtin: Literal["qwen2.5", "gpt2"] | None = Field(
        None, description="a vocabulary shipped by an installed package (no download)"
    )
    path: str | None = Field(None, description="a tokenizer.json or a .tiktoken BPE file")
    pat_str: str | None = Field(None, description="pre-tokenizer regex for a .tiktoken file")
    special_tokens: tuple[str, ...] = Field(
        ("<|endoftext|>",), description="special tokens appended after a .tiktoken vocabulary"
    )
    eos: str | None = Field(None, description="EOS token text; default: the tokenizer's own")
    train: TrainTokenizerConfig | None = None
    # --- cached Hugging Face names and added special tokens ---
    hf_name: str | None = Field(
        None, description="a Hugging Face tokenizer already in the local HF cache (never downloaded)"
    )
    hf_cache: str | None = Field(
        None, description="HF hub cache folder; default: $HF_HUB_CACHE, else $HF_HOME/hub"
    )
    added_tokens: tuple[str, ...] = Field(
        (), description="special tokens added when missing (FIM, repo/file markers); "
        "the run adds those its output sets need"
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> TokenizerConfig:
        chosen = [k for k in ("builtin", "path", "hf_name", "train") if getattr(self, k) is not None]
        if len(chosen) != 1:
            raise ValueError(
                "set exactly one of tokenizer.builtin (qwen2.5|gpt2), tokenizer.path "
                "(tokenizer.json or .tiktoken), tokenizer.hf_name (a cached HF tokenizer) or "
                f"tokenizer.train; got {chosen or 'none'}"
            )
        return self


class FimConfig(Model):
    """Fill-in-the-middle as StarCoder2 / DeepSeek-Coder / Qwen2.5-Coder train it.

    Token texts default to Qwen2.5-Coder's; they are added to the vocabulary when missing.
    """

    rate: float = Field(0.5, ge=0, le=1, description="share of documents (files) rearranged")
    spm_rate: float = Field(0.5, ge=0, le=1, description="share of FIM documents in SPM order, else PSM")
    prefix_token: str = "<|fim_prefix|>"
    middle_token: str = "<|fim_middle|>"
    suffix_token: str = "<|fim_suffix|>"
