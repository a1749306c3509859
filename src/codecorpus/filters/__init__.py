"""Heuristic quality filters: each rule drops rows with a named, counted reason.

``basic`` holds StarCoder's three line/character filters; ``stage`` applies them
to a shard and writes what it dropped to the drop log.
"""
