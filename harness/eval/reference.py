"""``harness eval --reference``: pydantic-ai-harness 0.62 on the same transcripts, scored by harness.

The reference runs in its own virtual environment (:func:`reference_python` creates it
from PyPI on first use: ``pydantic-ai-harness==0.62.0``, which pins
``pydantic-ai-slim==2.62.0``, and tiktoken for the same cl100k counts). Its driver,
``harness/eval/_reference_driver.py``, imports nothing from harness: it replays each
transcript through the reference's equivalent stacks with pydantic-ai's agent loop and
prints every context its model received, as pydantic-ai JSON (each distinct message once,
each request as a list of message indices). Here those contexts are loaded back with
:func:`harness.load_messages` (one object per distinct message, so the per-part caches
work as they do for harness's own replays) and scored by exactly the same code: probes,
recall, tokens, prefixes and prices, validity.

The environment lives in ``$HARNESS_REFERENCE_VENV``, else
``$XDG_CACHE_HOME/harness/reference-venv`` (``~/.cache/harness/reference-venv``).
``benchmarks/run.py --reference`` uses :func:`reference_python` too, with its own folder.
"""

from __future__ import annotations

__all__ = [
    "REFERENCE_REQUIREMENT",
    "REFERENCE_STACKS",
    "default_reference_venv",
    "reference_python",
    "run_reference",
    "score_reference_run",
]

import json
import os
import subprocess
import sys
import time
import venv
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

from harness.core.messages import CanonicalMessage
from harness.errors import EvalRunError
from harness.eval.budget import is_unavoidable
from harness.eval.pricing import Prices, price_requests
from harness.eval.probes import ProbeSet, extract_probes
from harness.eval.recall import RecallScorer
from harness.eval.report import EvalReport, RunFigures
from harness.eval.serialize import RequestTokens
from harness.history import check_invariants
from harness.tokens import TokenCounter

REFERENCE_REQUIREMENT: Final = "pydantic-ai-harness==0.62.0"
"""The reference distribution (it pins ``pydantic-ai-slim==2.62.0``)."""

REFERENCE_STACKS: Final = ("clear+window", "tiered")
"""The reference's stacks equivalent to harness's presets (see the driver's docstring)."""

_DRIVER: Final = Path(__file__).with_name("_reference_driver.py")


def _tiktoken_requirement() -> str:
    from importlib.metadata import version

    return f"tiktoken=={version('tiktoken')}"


def default_reference_venv() -> Path:
    """Where ``harness eval --reference`` keeps the reference environment."""
    explicit = os.environ.get("HARNESS_REFERENCE_VENV")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "harness" / "reference-venv"


def reference_python(
    folder: Path | None = None,
    requirements: Sequence[str] | None = None,
    *,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Create (once) the reference virtual environment and return its interpreter.

    The environment is (re)installed when its ``.installed`` marker does not list exactly
    ``requirements``; otherwise nothing is downloaded.

    Args:
        folder: The environment (default: :func:`default_reference_venv`).
        requirements: What to install (default: :data:`REFERENCE_REQUIREMENT` and tiktoken,
            at harness's own version).
        log: Told what is being installed (default: a line on stderr).

    Raises:
        subprocess.CalledProcessError: pip failed (for example, no network).
    """
    where = folder if folder is not None else default_reference_venv()
    wanted = (
        list(requirements) if requirements is not None else [REFERENCE_REQUIREMENT, _tiktoken_requirement()]
    )
    python = where / "bin" / "python"
    marker = where / ".installed"
    if marker.exists() and marker.read_text().split("\n") == wanted and python.exists():
        return python

    def say(text: str) -> None:
        if log is not None:
            log(text)
        else:
            print(text, file=sys.stderr)

    if not python.exists():
        say(f"creating {where} with {', '.join(wanted)} ...")
        venv.EnvBuilder(with_pip=True, clear=True).create(where)
    else:
        say(f"installing {', '.join(wanted)} into {where} ...")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *wanted], check=True)
    marker.write_text("\n".join(wanted))
    return python


def _encoding_job() -> dict[str, Any]:
    import harness.tokens._encodings as encodings

    spec = encodings.ENCODING_SPECS["cl100k_base"]
    path = encodings.cache_file(spec)
    if path is None or not path.is_file():
        path = encodings.offline_package_file("cl100k_base")
    if path is None:
        raise EvalRunError(
            "(reference)", "(all)", 0, "no local cl100k_base file for the reference's tokenizer"
        )
    return {"path": str(path), "pat_str": spec.pat_str, "special_tokens": dict(spec.special_tokens)}


def score_reference_run(
    run: dict[str, Any], probes: ProbeSet, prices: Prices, *, model_name: str | None = None
) -> RunFigures:
    """Score one reference run (a driver record) with harness's probes, counter and prices."""
    from harness.wire import load_messages

    started = time.perf_counter()
    file, stack, budget = str(run["file"]), str(run["stack"]), int(run["budget"])
    if run.get("error"):
        raise EvalRunError(file, f"reference {stack}", budget, str(run["error"]))
    table = load_messages(json.dumps(run["messages"]))
    counter = TokenCounter(model_name)
    tokens = RequestTokens(counter)
    scorer = RecallScorer(probes)
    requests: list[tuple[int, int]] = []
    invalid = 0
    unavoidable = 0
    previous: list[CanonicalMessage] = []
    for indices in run["requests"]:
        sent: list[CanonicalMessage] = [table[int(i)] for i in indices]
        total = counter.count_messages(sent)
        requests.append((total, tokens.common_prefix(previous, sent) if previous else 0))
        unavoidable += is_unavoidable(sent, total, budget, counter)
        invalid += bool(check_invariants(sent))
        scorer.score(sent)
        previous = sent
    priced = price_requests(prices, requests)
    sizes = [size for size, _ in requests]
    return RunFigures(
        file=file,
        stack=stack,
        spec=str(run.get("spec", "")),
        budget=budget,
        side="reference",
        requests=len(sizes),
        total_tokens=sum(sizes),
        peak_tokens=max(sizes, default=0),
        over_budget=sum(1 for size in sizes if size > budget),
        over_budget_unavoidable=unavoidable,
        costs=dict(priced.costs),
        cached_tokens=dict(priced.cached_tokens),
        cache_busts=priced.cache_busts,
        invalid_contexts=invalid,
        recall={name: (c.visible, c.due) for name, c in scorer.totals.items()},
        seconds=time.perf_counter() - started,
    )


def run_reference(
    report: EvalReport,
    *,
    stacks: Sequence[str] = REFERENCE_STACKS,
    python: Path | None = None,
    processes: int | None = None,
) -> EvalReport:
    """Run the reference's stacks on ``report``'s files and budgets; return the report with them added.

    The files are split over ``processes`` driver processes (default: the CPUs).

    Raises:
        EvalRunError: The driver failed, or a reference replay failed.
        subprocess.CalledProcessError: The environment could not be created.
    """
    started = time.perf_counter()
    interpreter = python if python is not None else reference_python()
    encoding = _encoding_job()
    files = sorted(report.files, key=lambda f: -os.path.getsize(f))
    count = max(1, min(len(files), processes if processes is not None else (os.cpu_count() or 1)))
    chunks = [files[i::count] for i in range(count)]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}

    def drive(chunk: list[str]) -> str:
        job = {"files": chunk, "stacks": list(stacks), "budgets": list(report.budgets), "encoding": encoding}
        done = subprocess.run(
            [str(interpreter), str(_DRIVER)],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            raise EvalRunError(
                "(reference)", "(all)", 0, f"the reference driver failed: {done.stderr.strip()[-2000:]}"
            )
        return done.stdout

    with ThreadPoolExecutor(max_workers=len(chunks)) as pool:
        outputs = list(pool.map(drive, chunks))
    from harness.replay import ReplayModel
    from harness.wire import load_history

    probes: dict[str, tuple[ProbeSet, str]] = {}
    scored: list[RunFigures] = []
    for output in outputs:
        for run in json.loads(output)["runs"]:
            file = str(run["file"])
            if file not in probes:
                history = load_history(Path(file))
                probes[file] = (extract_probes(history), ReplayModel(history).model_name)
            found, model_name = probes[file]
            scored.append(score_reference_run(run, found, report.prices, model_name=model_name))
    order = {f: i for i, f in enumerate(report.files)}
    scored.sort(key=lambda r: (order[r.file], stacks.index(r.stack), r.budget))
    return report.with_runs(scored, seconds=time.perf_counter() - started)
