"""The results dataset card: what the per-run results of a study or grid hold (runs, predictions, the summary), the
test data each task was scored on, and how to load them, built with huggingface_hub's `DatasetCard`
(`results_template.md`). Written by `python -m model_cards.generate --results DIR --summary CSV`."""

from pathlib import Path

from huggingface_hub import DatasetCard, DatasetCardData

from core import store
from core.names import scaled_name
from core.paper import PAPER_ARXIV_ID
from model_cards import results_dataset
from model_cards.public import LOCAL, PLACEHOLDER_ORG
from model_cards.summary import check_summary, read_summary, table_rows

RESULTS_TEMPLATE = Path(__file__).with_name("results_template.md")
# The results quote task data (SQuAD answer spans, CC BY-SA 4.0), so they are share-alike; the scores are ours.
RESULTS_LICENSE = "cc-by-sa-4.0"


def _scan_runs(results_dir: Path) -> list[dict]:
    """(model, task, whether diverged, data source) of every result file, checked; per-instance data is not kept."""
    if not (paths := store.result_files(results_dir)):
        raise FileNotFoundError(f"no per-run results under {results_dir}: expected <model>/<task>/lr<lr>-seed<s>.json")
    return [
        {
            "model": run["model"],
            "task": run["task"],
            "diverged": not store.scored(run),
            "source": results_dataset.record_source(run),
            "scored": results_dataset.scored_test(run)["text"],
        }
        for run in map(store.read_result, paths)
    ]


def build_results_card(results_dir, summary_csv, repo_id: str | None = None, scale: str | None = None) -> DatasetCard:
    """The dataset card of the per-run results in `results_dir` (`summary_csv`: the report's summary; `repo_id`: shown
    in the loading snippet; `scale`: models named as the report names them), with the `runs`, `predictions` and
    `summary` configs and their schemas."""
    runs = [{**r, "model": scaled_name(r["model"], scale)} for r in _scan_runs(Path(results_dir))]
    rows = read_summary(summary_csv)
    check_summary(rows, results_dir, summary_csv, complete=True)
    models = sorted({r["model"] for r in runs})
    configs, info = results_dataset.dataset_configs()
    card_data = DatasetCardData(
        pretty_name="MLM vs CLM encoder study: fine-tuning results",
        language="en",
        license=RESULTS_LICENSE,
        tags=["mlm-vs-clm", "evaluation", f"arxiv:{PAPER_ARXIV_ID}"],
        configs=configs,
        dataset_info=info,
    )
    from evaluation.tasks import describe_test_data  # the task registry: imported only when scores are described

    data = []
    for task, source in sorted({(r["task"], r["source"]) for r in runs}):
        described = describe_test_data(task, source)
        scored = sorted({r["scored"] for r in runs if (r["task"], r["source"]) == (task, source)})
        data.append(
            {
                "task": task,
                "source": source,
                "label": described["label"],
                "notes": described["notes"],
                "scored": "; ".join(filter(None, scored)) or "not kept",
            }
        )
    return DatasetCard.from_template(
        card_data,
        template_path=str(RESULTS_TEMPLATE),
        repo_id=repo_id or f"<{PLACEHOLDER_ORG}>/<results>",
        results_folder=results_dataset.RESULTS_FOLDER,
        runs_file=results_dataset.RUNS_FILE,
        predictions_folder=results_dataset.PREDICTIONS_FOLDER,
        n_runs=len(runs),
        n_models=len(models),
        n_tasks=len({r["task"] for r in runs}),
        n_diverged=sum(r["diverged"] for r in runs),
        models=models,
        data=data,
        summary_rows=[{"model": r["model"], **row} for r, row in zip(rows, table_rows(rows))],
        local=LOCAL,
    )
