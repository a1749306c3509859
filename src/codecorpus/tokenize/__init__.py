"""Tokenizer loading (builtin vocabularies, tokenizer.json, .tiktoken, trained) and the tokenize stage.

Everything here works offline: builtin vocabularies come from installed packages,
never from a hub.
"""
