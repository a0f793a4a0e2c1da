"""The analysis of results: statistics (means, CIs, paired tests, Holm), findings (a verdict per paper finding),
figures and the report. It reads result records through `core.store` and imports nothing else of ours: building a
report or a card loads neither `datasets` nor torch."""
