"""The paper's facts the code reads, in one place: its evaluation grid (EncodEval's configs, `docs/protocol.md`
"Evaluation": 12 tasks by this project's registry names, 6 learning rates, 5 seeds), its global batch, its released
intermediate checkpoints, its models' parameter counts and the crossover where MLM overtakes CLM. The grid's defaults
(`evaluation.run`), the plan, the EncodEval importer, the manifest, the findings and the benchmarks read them here."""

PAPER_ARXIV_ID = "2507.00994"  # cited by every card
PAPER_TASKS = (
    "sst2",
    "mnli",
    "qqp",
    "conll2003",
    "ontonotes",
    "uner",
    "squad",
    "squad_v2",
    "record",
    "msmarco",
    "nq",
    "mldr",
)
PAPER_LRS = (1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4)
PAPER_SEEDS = (0, 1, 2, 3, 4)
PAPER_GLOBAL_BATCH, PAPER_BLOCK = 1152, 2048  # blocks per step, tokens per block
PAPER_TOKENS_PER_STEP = PAPER_GLOBAL_BATCH * PAPER_BLOCK  # 2.36M tokens per step (the paper's "about 2.4M")
PAPER_CHECKPOINTS = (1000, 2000, 5000, 10000, 20000, 40000)  # the released intermediate checkpoints (steps)
# The paper's PFS runs: budget -> its CLM-to-MLM switch steps (a quarter, half and three quarters of it, rounded)
PAPER_PFS_SWITCHES = {12_000: (3_000, 6_000, 9_000), 22_000: (5_000, 11_000, 17_000), 42_000: (10_000, 21_000, 32_000)}
# The paper's parameter counts, input embedding included, LM head excluded; and its input embeddings (128,256 x hidden)
PAPER_PARAMETERS = {"210m": 211.8e6, "610m": 607.9e6, "1b": 1187.9e6}
PAPER_EMBEDDINGS = {"210m": 128_256 * 768, "610m": 128_256 * 1152, "1b": 128_256 * 1728}
# The paper's crossover, where MLM overtakes CLM, in steps of its 610m model: SC and QA by 10k, IR by 20k; TC has none
CROSSOVER_STEPS = {"sc": 10_000, "qa": 10_000, "ir": 20_000}
