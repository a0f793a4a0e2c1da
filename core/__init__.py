"""The ground floor every package of the project builds on, importing nothing of the project itself:

- `names`: the study's model-name grammar (`ModelName`, `-pseed<k>` replicates);
- `paths`: where the repository, the data bundle and sources are found (the one Hub-id-or-local-path rule);
- `artifacts`: the files the project writes and reads (run_info.json, study.json, summary.csv), atomic writes,
  locks, checkpoint identity, library versions, the git commit;
- `store`: the results store: the result record (format, constructor, reader, "current for this identity"),
  locks, move-aside, finetune_info.json;
- `sentence_transformers_files`: the sentence-transformers files beside a checkpoint;
- `cli`: the command-line convention (bad input: one line, exit status 2, nothing written);
- `colours`: one colour per pretraining objective, the same in every figure;
- `formatting`: how a number is written in a table (the report, the held-out CSV, the cards);
- `paper`: the paper's facts (its grid: 12 tasks, 6 learning rates, 5 seeds; batch, checkpoints, crossover);
- `lora`: LoRA through peft, the one module of core that imports torch, peft and transformers (imported only where
  a model is built: the report and the cards never load it).
"""
