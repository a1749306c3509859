"""Heuristic quality filters: each rule drops rows with a named, counted reason.

``rules`` holds the rules as data (StarCoder, StarCoder2, OpenCoder), ``basic`` StarCoder's
line and character scores; ``stage`` scores a shard, drops by the rules, decontaminates and
redacts; ``spec`` declares the stage.
"""
