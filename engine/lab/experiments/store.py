"""The exercises' results file: written atomically after every finished run, read back to resume.

The file (format :data:`EXERCISES_FORMAT`) is one JSON object::

    format, created, updated
    settings   {budget, base_model, corpus: {name, fingerprint, vocab_size, train_tokens, val_tokens, ...},
                exercises, seeds, validation}   (what every run shares; a resume must match it)
    sessions   [{command, started, jobs, threads, machine, load_start, load_end, ended}]  (one per command)
    runs       {run_id: measurement.measure_task dict + session, machine}   (in plan order)
    failed     [{run_id, session, exitcode, traceback, at}]  (runs a worker did not finish; tried again on resume)
    exercises  {name: {reference, runs, seeds_complete, comparisons: [stats.comparison_to_dict of each],
                       by_position: {key: {mean, difference}}}}
    planned, complete

The page reads it with ``engine.lab.results.read_exercises``, which defines the file's name and format.
Every write goes to a temporary file in the same folder that is then renamed over the file
(``os.replace``), so a reader, or a command killed mid-write, never sees half a file.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from engine.lab.experiments.definitions import EXERCISES
from engine.lab.experiments.stats import comparison_to_dict, paired_comparison
from engine.lab.results import EXERCISES_FILE, EXERCISES_FORMAT

__all__ = ["EXERCISES_FILE", "EXERCISES_FORMAT", "ResultsBusyError", "ResultsFile", "ResultsMismatchError",
           "exercise_summary", "hold_lock", "lock_path", "now", "read_file", "write_atomically"]


class ResultsMismatchError(ValueError):
    """An existing results file was made with other settings (budget, model, corpus) than the command's."""


class ResultsBusyError(RuntimeError):
    """Another command is writing the same results file (it holds the file's lock)."""


def lock_path(path: Path) -> Path:
    """Where :func:`hold_lock` keeps the lock of the results file ``path``: the system's temporary folder, named
    after the file's absolute path (so the checkout holds no lock files)."""
    digest = hashlib.sha256(str(path.resolve()).encode("utf-8")).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"engine-lab-exercises-{digest}.lock"


def hold_lock(path: Path):
    """An open lock file for ``path`` (:func:`lock_path`), locked for this process until it is closed.

    Two commands writing one file would each keep only their own runs; the second one is refused instead.
    Where ``fcntl`` is missing (Windows) nothing is locked and None is returned.

    Raises:
        ResultsBusyError: if another process holds the lock.
    """
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks of this kind
        return None
    handle = open(lock_path(path), "a")  # noqa: SIM115 (held open for the command's life)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        handle.close()
        raise ResultsBusyError(f"another command is writing {path}; wait for it or stop it first") from exc
    return handle


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def write_atomically(path: Path, data: dict) -> None:
    """Writes ``data`` as JSON to ``path`` through a temporary file renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, ensure_ascii=False, indent=1) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the file from a server running as another user
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_file(path: Path) -> dict | None:
    """The results file at ``path``, or None when there is none.

    Raises:
        ValueError: if it is not valid JSON or not of :data:`EXERCISES_FORMAT`.
    """
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict) or data.get("format") != EXERCISES_FORMAT or not isinstance(data.get("runs"), dict):
        raise ValueError(f"{path}: not a results file of format {EXERCISES_FORMAT}")
    return data


def exercise_summary(name: str, runs: dict[str, dict]) -> dict:
    """One exercise's paired comparisons and losses by position over the runs finished so far.

    Args:
        name: a key of ``definitions.EXERCISES``.
        runs: the file's ``runs`` (any exercise's; those of other configurations are ignored).

    Returns:
        ``reference``, ``runs``, ``seeds_complete`` (seeds with every run of the exercise), ``comparisons``
        (each run against the reference, over the seeds both have: ``stats.comparison_to_dict``),
        ``by_position`` ({key: ``mean`` over its seeds, and ``difference`` from the reference averaged over the
        shared seeds, None without one; lists of block_size floats in nats}).
    """
    exercise = EXERCISES[name]
    loss: dict[str, dict[int, float]] = {key: {} for key in exercise.runs}
    curve: dict[str, dict[int, np.ndarray]] = {key: {} for key in exercise.runs}
    for run in runs.values():
        if run["key"] in loss:
            loss[run["key"]][run["seed"]] = run["val_loss"]
            curve[run["key"]][run["seed"]] = np.asarray(run["val_loss_by_position"], dtype=np.float64)
    complete = sorted(set.intersection(*(set(v) for v in loss.values())))
    ref = exercise.reference
    comparisons = [comparison_to_dict(paired_comparison(ref, key, loss[ref], loss[key]))
                   for key in exercise.runs if key != ref and set(loss[ref]) & set(loss[key])]
    by_position = {}
    for key in exercise.runs:
        if not curve[key]:
            continue
        shared = sorted(set(curve[key]) & set(curve[ref]))
        difference = (np.mean([curve[key][s] - curve[ref][s] for s in shared], axis=0) if shared and key != ref
                      else None)
        by_position[key] = {
            "seeds": sorted(curve[key]),
            "mean": np.round(np.mean(list(curve[key].values()), axis=0), 4).tolist(),
            "difference": None if difference is None else np.round(difference, 4).tolist(),
        }
    return {"reference": ref, "runs": list(exercise.runs), "seeds_complete": complete,
            "comparisons": comparisons, "by_position": by_position}


class ResultsFile:
    """The results file of one command: what is done, what to add, written after each change.

    Args:
        path: the JSON file; read if it exists (a resume), else created on the first write.
        settings: what every run shares (budget, base model, corpus, validation rule); an existing file must
            hold the same, except ``seeds`` and ``exercises``, which a later command may extend.
        planned: run ids this command means to have, in order.
        session: this command's record (command line, jobs, threads, machine, load at start).

    Raises:
        ValueError: if an existing file is not a results file.
        ResultsMismatchError: if it was made with other settings.
        ResultsBusyError: if another command is writing it (:func:`hold_lock`).
    """

    def __init__(self, path: Path, settings: dict, planned: list[str], session: dict):
        self.path = path
        self.lock = hold_lock(path)
        try:
            self._open(settings, planned, session)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Releases the file's lock (also released when the process ends)."""
        if self.lock is not None:
            self.lock.close()
            self.lock = None

    def _open(self, settings: dict, planned: list[str], session: dict) -> None:
        path = self.path
        existing = read_file(path)
        if existing is None:
            created = now()
            self.data = {"format": EXERCISES_FORMAT, "created": created, "updated": created,
                         "settings": settings, "sessions": [], "runs": {}, "failed": [], "exercises": {},
                         "planned": [], "complete": False}
        else:
            fixed = {k: v for k, v in settings.items() if k not in ("seeds", "exercises")}
            old = {k: v for k, v in existing["settings"].items() if k not in ("seeds", "exercises")}
            if fixed != old:
                differ = sorted(k for k in set(fixed) | set(old) if fixed.get(k) != old.get(k))
                raise ResultsMismatchError(f"{path} was made with other settings ({', '.join(differ)}); "
                                           "resume with the same ones or write to another --out")
            self.data = existing
            for field in ("seeds", "exercises"):
                merged = list(existing["settings"][field])
                merged += [v for v in settings[field] if v not in merged]
                self.data["settings"][field] = merged
        self.data["planned"] += [run_id for run_id in planned if run_id not in self.data["planned"]]
        self.data["sessions"].append(session)
        self.session = len(self.data["sessions"]) - 1
        self.write()

    @property
    def done(self) -> set[str]:
        """Run ids already in the file."""
        return set(self.data["runs"])

    def add_run(self, result: dict) -> None:
        """Stores one finished run (``measurement.measure_task``'s dict plus ``machine``) and writes the file."""
        self.data["runs"][result["run_id"]] = {**result, "session": self.session}
        order = {run_id: i for i, run_id in enumerate(self.data["planned"])}
        self.data["runs"] = dict(sorted(self.data["runs"].items(), key=lambda kv: order.get(kv[0], len(order))))
        self.write()

    def add_failure(self, run_id: str, failure: dict) -> None:
        """Records a run whose worker ended without a result (``failure``: ``exitcode``, ``traceback``), writes."""
        self.data["failed"].append({"run_id": run_id, "session": self.session, **failure, "at": now()})
        self.write()

    def end_session(self, **fields) -> None:
        """Adds ``fields`` (load at the end, end time) to this command's session record and writes the file."""
        self.data["sessions"][self.session].update(fields)
        self.write()

    def write(self) -> None:
        """Recomputes the exercises' summaries and ``complete``, then writes the file atomically."""
        runs = self.data["runs"]
        self.data["exercises"] = {name: exercise_summary(name, runs) for name in self.data["settings"]["exercises"]}
        self.data["complete"] = set(self.data["planned"]) <= set(runs)
        self.data["updated"] = now()
        write_atomically(self.path, self.data)
