"""SFT and agent-trace sets: normalize, validate, select, deduplicate, render with loss masks, split, pack."""
