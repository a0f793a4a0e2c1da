"""A Trainer run's progress on the console, for pretraining and fine-tuning alike: steps, loss and time left, from
the main process. On a terminal a bar (tqdm); anywhere else (a log file, a pipe) a line every 30 seconds
(`$MLM_VS_CLM_PROGRESS_SECONDS`: 0 for every step) and one at the end, so that whoever launches a run can send its
output to a log and read its progress there:

    fine-tuning lr=0.0001 seed=0: step 120/300, loss 0.6931, 01:02 elapsed, 01:33 left
"""

import os
import sys
import time

from tqdm.auto import tqdm
from transformers import TrainerCallback


def _shown(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class StepProgress(TrainerCallback):
    """label: what the bar or line is of ("pretraining", "fine-tuning"); log_lines: also print every log the
    Trainer makes (`{'loss': '2.31', ...}`, what transformers' own progress bar prints) on stdout."""

    def __init__(self, label: str, log_lines: bool = False):
        every = os.environ.get("MLM_VS_CLM_PROGRESS_SECONDS", "30")
        try:
            self.every = float(every)
        except ValueError:
            raise ValueError(f"MLM_VS_CLM_PROGRESS_SECONDS={every!r} must be a number of seconds") from None
        self.label, self.log_lines = label, log_lines
        self.bar, self.started, self.loss = None, None, None

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        self.first, self.started = state.global_step, time.monotonic()  # a resumed run: its own steps
        self.printed = self.started
        if sys.stderr.isatty():
            self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc=self.label, unit="step", leave=False)

    def on_step_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)
        elif self.started is not None and time.monotonic() - self.printed >= self.every:
            self.print_line(state)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.started is None or not logs:
            return
        if "loss" in logs:
            self.loss = logs["loss"]
            if self.bar is not None:
                self.bar.set_postfix_str(f"loss {_shown(self.loss)}")
        if self.log_lines:
            tqdm.write(str({key: _shown(value) for key, value in logs.items() if key != "total_flos"}))

    def on_train_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.close()
        elif self.started is not None:
            self.print_line(state)
        self.bar = self.started = None

    def print_line(self, state) -> None:
        """`label: step S/N, loss L, T elapsed, T left` on stderr (the time left from this run's steps so far)."""
        self.printed = time.monotonic()
        elapsed, done = self.printed - self.started, state.global_step - self.first
        left = elapsed / done * (state.max_steps - state.global_step) if done else None
        parts = [f"step {state.global_step}/{state.max_steps}"]
        parts += [f"loss {_shown(self.loss)}"] if self.loss is not None else []
        parts += [f"{tqdm.format_interval(elapsed)} elapsed"]
        parts += [f"{tqdm.format_interval(left)} left"] if left is not None else []
        print(f"{self.label}: {', '.join(parts)}", file=sys.stderr, flush=True)
