"""The ground floor every package of the project builds on, importing nothing of the project itself:

`names` (the model-name grammar), `paths` (the repository, the data bundle, Hub id or local path), `artifacts`
(atomic writes, reads, locks), `run_folders` (what a run and a study folder hold, provenance), `model_folders` (a
loadable model folder, checkpoint identity), `store` (the result record and the results store), `paper` (the paper's
facts), `cli` (the command-line convention), `colours`, `formatting`, `sentence_transformers_files`, `threads` (the
CPU thread policy), and the two modules of core that import torch, loaded only where a model is built or trained:
`lora` (peft) and `progress` (a Trainer run's progress on the console).
"""
