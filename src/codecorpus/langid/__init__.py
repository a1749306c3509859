"""Language tagging: each document gets a GitHub Linguist language name, a kind and the rule that decided.

``languages`` is the table (extensions, file names, interpreters); ``stage`` is the
annotator that applies it to a shard.
"""
