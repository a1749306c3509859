"""``python -m codecorpus``: the same as the ``codecorpus`` command."""

from codecorpus.cli import main

main()
