"""The table a benchmark of several runs ends with: each figure's median, min and max."""
import statistics


def print_runs(runs: list[dict[str, float]], width: int = 26, precision: int = 3) -> None:
    """One line per figure of the first run, over every run (each run a {figure: value} dict)."""
    print(f"{'figure':<{width}}{'median':>10}{'min':>10}{'max':>10}   ({len(runs)} runs)")
    for key in runs[0]:
        values = [run[key] for run in runs]
        print(f"{key:<{width}}{statistics.median(values):>10.{precision}f}{min(values):>10.{precision}f}"
              f"{max(values):>10.{precision}f}")
