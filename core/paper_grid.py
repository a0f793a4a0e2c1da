"""The paper's evaluation grid (EncodEval's configs, `docs/protocol.md` "Evaluation"): its 12 tasks (this project's
registry names), 6 learning rates and 5 seeds. The grid's defaults (`evaluation.run`), the plan and the EncodEval
importer's list of missing runs all read it here."""

PAPER_TASKS = ("sst2", "mnli", "qqp", "conll2003", "ontonotes", "uner", "squad", "squad_v2", "record", "msmarco", "nq",
               "mldr")
PAPER_LRS = (1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4)
PAPER_SEEDS = (0, 1, 2, 3, 4)
