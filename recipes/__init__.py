"""Pretraining recipes: data pipeline, objectives, schedules, the study's run manifest and the study driver."""
