"""The one owner of the Lab's reader state: every ``lab_*`` session-state key is named here and nowhere else.

:class:`LabSession` wraps ``st.session_state`` with typed
accessors: this reader's training job and whether its model was collected, the reader's own
model and which model the page uses, the uploaded text and checkpoint read once per content, the
exercises' paired reruns. The page's sections receive a ``LabSession`` and never touch
``st.session_state`` themselves (``tests/test_architecture.py`` checks it). Widgets keep their own
keys (``key="lab_n_layer"`` ...), which the URL binding and the tests use.

A training is found again after a reload by the reader's browser (:func:`browser_id`), never by a token
in the URL: a link the reader shares carries nothing that takes over their job, its Stop button or its
model. The same id keeps one browser to one queued or running training, whatever its number of tabs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, MutableMapping

import streamlit as st
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.web.server.starlette.starlette_app_utils import decode_xsrf_token_string
from streamlit.web.server.starlette.starlette_server_config import XSRF_COOKIE_NAME

from engine.baselines import Baselines
from engine.checkpoint import CheckpointError
from engine.corpus import Corpus
from engine.lab import settings as rules
from engine.lab.experiments import rerun as lab_rerun
from engine.lab.experiments.rerun import PairedRerun
from engine.lab.jobs import PairedRerunJob, TrainingJob
from engine.lab.models import LabModel, UploadResult
from engine.lab.runner import BrowserBusy, LabRunner
from engine.presets import PRESETS

#: The query parameter in which links made before carried a training's token; the page removes it.
JOB_TOKEN = "lab_job_token"
#: Which model the page uses: the reader's own (trained or uploaded) or the one shipped with the app.
OWN, SHIPPED = "own", "shipped"
#: The generation form's poem-form controls (widget keys, which are also their URL parameters): characters per
#: line and lines per poem.
FORM_LINE_LENGTH, FORM_LINES = "lab_form_chars", "lab_form_lines"

# Session-state keys (widgets' keys are theirs: the URL binding and the tests name them).
_JOB, _COLLECTED, _OWN, _USE, _NOTICE = "lab_job", "lab_collected", "lab_own", "lab_use", "lab_notice"
_CORPUS_UPLOAD, _CKPT_DIGEST, _CKPT_ERROR = "lab_corpus_upload", "lab_ckpt_digest", "lab_ckpt_error"
_EXP_JOBS, _EXP_LIVE, _N_HEAD = "lab_exp_jobs", "lab_exp_live", "lab_n_head"
_JOB_BASELINES = "lab_job_baselines"
_BUSY, _JOINED, _LEFT = "lab_busy", "lab_joined", "lab_left"


@st.cache_resource
def lab_runner() -> LabRunner:
    """The app-wide runner: registry of finished models, experiment cache, one training at a time."""
    return LabRunner(max_concurrent=1, registry_size=6)


def owner_alive() -> Callable[[], bool] | None:
    """A callable that tells a job whether this reader's session is still connected (Streamlit's runtime).

    None where there is no Streamlit runtime (``AppTest``, scripts): the job then lives until it
    ends or reaches its wall-time cap.
    """
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None or not runtime.exists():
        return None
    instance, session_id = runtime.get_instance(), ctx.session_id
    return lambda: instance.is_active_session(session_id)


def browser_id() -> str | None:
    """An opaque id of the reader's browser: the same in each of its tabs and after a reload, or None.

    Streamlit gives each browser one XSRF cookie (``_streamlit_xsrf``, sent with the page's websocket: a
    random token that every response masks anew) and checks it on every upload; the id is a SHA-256 of the
    unmasked token, so neither the runner nor a log ever holds the token itself. Another browser, or a
    private window, has another cookie. None without the cookie (XSRF protection off, ``AppTest``): the
    runner then applies no per-browser rule and a reload does not find the job.
    """
    raw = st.context.cookies.get(XSRF_COOKIE_NAME) if runtime.exists() else None
    token, _timestamp = decode_xsrf_token_string(raw) if isinstance(raw, str) else (None, None)
    if not token:
        return None
    return hashlib.sha256(b"lab-browser/" + token).hexdigest()[:32]


class LabSession:
    """This reader's state on the Lab page, over ``st.session_state`` and ``st.query_params``.

    Args:
        runner: the app-wide runner (:func:`lab_runner`), asked for a job when the URL names one.
        state, query: the session's state and URL parameters (Streamlit's by default; a dict in tests).
    """

    def __init__(self, runner: LabRunner, state: MutableMapping | None = None, query: MutableMapping | None = None):
        self.runner = runner
        self._state = st.session_state if state is None else state
        self._query = st.query_params if query is None else query

    # --- the training job -------------------------------------------------------------------------------------
    def _drop_token(self) -> None:
        if JOB_TOKEN in self._query:
            del self._query[JOB_TOKEN]

    @property
    def job(self) -> TrainingJob | None:
        """This session's training, or this browser's when the reader reloaded the page (taken over once).

        The runner hands a job over only to the browser that started it and only once its session is gone
        (``LabRunner.reclaim``). A job token left in the URL by an older link is removed, unused.
        """
        job = self._state.get(_JOB)
        if job is None:
            job = self.runner.reclaim(browser_id(), owner_alive() or (lambda: True))
            if isinstance(job, TrainingJob):
                self._state[_JOB] = job
            else:
                job = None
        self._drop_token()
        return job

    @property
    def training(self) -> bool:
        """True while this session's training is queued or running."""
        job = self.job
        return job is not None and not job.snapshot().finished

    @property
    def collected(self) -> bool:
        """True when the page already took the finished job's model (or there is no job)."""
        job = self._state.get(_JOB)
        return job is None or self._state.get(_COLLECTED) == job.token

    def collect_finished_job(self) -> None:
        """A finished training of this session becomes the reader's model (once)."""
        job = self.job
        if job is None or self.collected or not job.snapshot().finished:
            return
        self._state[_COLLECTED] = job.token
        if job.result is not None:
            self.use_own(job.result)

    def start_training(self, plan: rules.TrainingPlan, corpus) -> None:
        """Submits a training; a model trained before with the same settings is taken at once (with a notice).

        A browser whose other tab has a training queued or running gets no second one (:meth:`pop_busy_notice`);
        a reader who asks for the very training another reader's job is queued or running with follows that job
        (:meth:`pop_join_notice`), and its model becomes theirs too when it ends.
        """
        try:
            submitted = self.runner.submit(plan, corpus, owner_alive=owner_alive(), browser_id=browser_id())
        except BrowserBusy:
            self._state.setdefault(_BUSY, set()).add("training")
            return
        if submitted.reused:
            self.use_own(submitted.model)
            self._state[_NOTICE] = True
        else:
            self._state[_JOB] = submitted.job
            self._state[_JOINED] = submitted.joined

    def stop_training(self) -> None:
        """The Stop button's callback: stops this session's training, or, when other readers follow it too, takes
        this reader out of it (it goes on for them, and this page forgets it: :meth:`pop_left_notice`)."""
        job = self._state.get(_JOB)
        if job is None:
            return
        if job.leave(browser_id()):
            del self._state[_JOB]
            self._state[_LEFT] = True

    def followers(self) -> int:
        """How many other browsers follow this session's training now (0 without one)."""
        job = self._state.get(_JOB)
        return 0 if job is None else max(0, len(job.browser_ids) - 1)

    def pop_join_notice(self) -> bool:
        """True once after :meth:`start_training` made this reader follow another reader's job."""
        return bool(self._state.pop(_JOINED, None))

    @property
    def left_pending(self) -> bool:
        """True from :meth:`stop_training` leaving a training others go on with until :meth:`pop_left_notice`."""
        return bool(self._state.get(_LEFT))

    def pop_left_notice(self) -> bool:
        """True once after :meth:`stop_training` took this reader out of a training others go on with."""
        return bool(self._state.pop(_LEFT, None))

    def pop_busy_notice(self, where: str) -> bool:
        """True once after :meth:`start_training` (``where="training"``) or :meth:`start_rerun` (the experiment's
        name) was refused because this browser already has a training queued or running."""
        busy = self._state.get(_BUSY, set())
        if where not in busy:
            return False
        busy.discard(where)
        return True

    def job_baselines(self, job: TrainingJob, count: Callable[[Corpus], Baselines | None]) -> Baselines | None:
        """The counting baselines of ``job``'s training text, counted by ``count`` while the job holds its text
        (a finished job lets go of it) and kept for this job."""
        held = self._state.get(_JOB_BASELINES)
        if held is None or held[0] != job.token:
            if job.corpus is None:
                return None
            held = (job.token, count(job.corpus))
            self._state[_JOB_BASELINES] = held
        return held[1]

    def pop_reuse_notice(self) -> bool:
        """True once after :meth:`start_training` reused a model."""
        return bool(self._state.pop(_NOTICE, None))

    # --- the model in use ---------------------------------------------------------------------------------------
    @property
    def own_model(self) -> LabModel | None:
        """The reader's own model: trained here or uploaded (never another reader's)."""
        return self._state.get(_OWN)

    def use_own(self, model: LabModel) -> None:
        """Makes ``model`` the reader's own and the one the page uses."""
        self._state[_OWN] = model
        self._state[_USE] = OWN

    def model_choices(self, shipped: LabModel | None) -> list[str]:
        """The models the reader may use (:data:`OWN`, :data:`SHIPPED`), the chosen one kept when still offered."""
        choices = [c for c, m in ((OWN, self.own_model), (SHIPPED, shipped)) if m is not None]
        if choices and self._state.get(_USE) not in choices:
            self._state[_USE] = choices[0]
        return choices

    # --- uploads, read once per content --------------------------------------------------------------------------
    def corpus_upload(self, data: bytes, name: str, read: Callable[[bytes, str], UploadResult]) -> UploadResult:
        """An uploaded text read by ``read`` once per content (the result lives in this session only)."""
        digest = hashlib.sha256(data).hexdigest()
        held = self._state.get(_CORPUS_UPLOAD)
        if held is None or held[0] != digest:
            held = (digest, read(data, name))
            self._state[_CORPUS_UPLOAD] = held
        return held[1]

    def checkpoint_upload(self, data: bytes, name: str, read: Callable[[bytes, str], LabModel]
                          ) -> CheckpointError | None:
        """An uploaded checkpoint read by ``read`` once per content: it becomes the reader's model, or its error."""
        digest = hashlib.sha256(data).hexdigest()
        if self._state.get(_CKPT_DIGEST) != digest:
            self._state[_CKPT_DIGEST] = digest
            try:
                self.use_own(read(data, name))
                self._state[_CKPT_ERROR] = None
            except CheckpointError as exc:
                self._state[_CKPT_ERROR] = exc
        return self._state.get(_CKPT_ERROR)

    # --- controls ------------------------------------------------------------------------------------------------
    def keep_heads(self, choices: tuple[int, ...], default: int) -> None:
        """Puts the head count back to ``default`` when it was kept from another n_embd or encoding."""
        if self._state.get(_N_HEAD, default) not in choices:
            self._state[_N_HEAD] = default

    def apply_preset(self, name: str) -> None:
        """Button callback: both halves of a preset with a training (quick, course) into the controls (their keys)."""
        config, training = PRESETS[name].model, PRESETS[name].training
        self._state.update({
            "lab_n_layer": config.n_layer, "lab_n_embd": config.n_embd, _N_HEAD: config.n_head,
            "lab_block": config.block_size, "lab_dropout": config.dropout, "lab_pos": config.pos_encoding,
            "lab_causal": True, "lab_seed": rules.DEFAULT_SEED, "lab_steps": training.steps,
            "lab_batch": training.batch_size, "lab_lr": training.learning_rate,
        })

    # --- experiment reruns ---------------------------------------------------------------------------------------
    def rerun_job(self, exercise: str) -> PairedRerunJob | None:
        """The paired rerun of ``exercise`` this session started and has not collected."""
        return self._state.get(_EXP_JOBS, {}).get(exercise)

    def rerunning(self, exercise: str) -> bool:
        """True while the paired rerun of ``exercise`` is queued or running."""
        job = self.rerun_job(exercise)
        return job is not None and not job.snapshot().finished

    def start_rerun(self, exercise: str, key: str, corpus, steps: int) -> None:
        """Reruns the comparison of ``key`` with the exercise's reference in the background (``rerun_budget(steps)``
        and the seeds ``RERUN_SEEDS`` of ``engine.lab.experiments.rerun``), or takes the runner's cached result at
        once (none while this browser has another training queued or running: :meth:`pop_busy_notice`)."""
        try:
            job, cached = self.runner.submit_rerun(
                exercise, key, corpus, lab_rerun.rerun_budget(steps), lab_rerun.RERUN_SEEDS,
                lab_rerun.RERUN_VAL_WINDOWS, owner_alive=owner_alive(), browser_id=browser_id())
        except BrowserBusy:
            self._state.setdefault(_BUSY, set()).add(exercise)
            return
        if cached is not None:
            self._state.setdefault(_EXP_LIVE, {})[exercise] = cached
        else:
            self._state.setdefault(_EXP_JOBS, {})[exercise] = job

    def collect_rerun(self, exercise: str) -> bool:
        """A finished rerun's result becomes the exercise's live result; True when one was collected."""
        job = self.rerun_job(exercise)
        if job is None or not job.snapshot().finished or job.result is None:
            return False
        self._state.setdefault(_EXP_LIVE, {})[exercise] = job.result
        del self._state[_EXP_JOBS][exercise]
        return True

    def live_result(self, exercise: str) -> PairedRerun | None:
        """The latest paired rerun of ``exercise`` this session finished, or None."""
        return self._state.get(_EXP_LIVE, {}).get(exercise)
