"""Recording helpers: profile a few training steps into a run directory that Op Compare
reads, with step markers and a sidecar ``opcompare.json``.

TensorFlow / Keras::

    from tb_opcompare.recording import KerasProfiler
    model.fit(x, y, batch_size=32, callbacks=[KerasProfiler("logs/mnist_cpu_bs32", model="mnist")])

    # or a custom loop
    from tb_opcompare.recording import tf_profile
    with tf_profile("logs/mnist_cpu_bs32", model="mnist", batch_size=32) as profiler:
        for step, (x, y) in enumerate(dataset):
            with profiler.step(step):
                train_step(x, y)

PyTorch::

    from tb_opcompare.recording import torch_profile
    with torch_profile("logs/mnist_torch_cpu_bs32", model="mnist", batch_size=32) as profiler:
        for x, y in loader:
            train_step(x, y)
            profiler.step()

Every argument left out is read from the environment that ``tb-opcompare record`` sets
(``TB_OPCOMPARE_RUN_DIR``, ``TB_OPCOMPARE_MODEL``, ``TB_OPCOMPARE_BATCH_SIZE``), and
``TB_OPCOMPARE_PROFILE=0`` turns every helper into a no-op, so one training script runs
unprofiled in production. TensorFlow and PyTorch are imported only by their own helper.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator

from tb_opcompare.ingest.sidecar import write_sidecar

ENV_SWITCH = "TB_OPCOMPARE_PROFILE"
ENV_RUN_DIR = "TB_OPCOMPARE_RUN_DIR"
ENV_MODEL = "TB_OPCOMPARE_MODEL"
ENV_BATCH_SIZE = "TB_OPCOMPARE_BATCH_SIZE"
ENV_DEVICE = "TB_OPCOMPARE_DEVICE"
ENV_REPEAT = "TB_OPCOMPARE_REPEAT"
ENV_MATRIX = "TB_OPCOMPARE_MATRIX"  # JSON {dimension: value} of ``tb-opcompare record --matrix``
# The dimensions of ``--matrix``, and the sidecar field (the run fact) each one fills.
MATRIX_FACTS = {"precision": "precision", "backend": "compiler", "compiler": "compiler"}
DEFAULT_FIRST_STEP = 3  # after tracing, compilation and warm-up
DEFAULT_STEPS = 5


def _refuse_a_gpu_run_without_a_gpu(framework: str, has_gpu: Callable[[], bool]) -> None:
    """``tb-opcompare record --devices gpu`` with a framework that sees no GPU (a CPU build,
    a driver it cannot load) would record a CPU profile into a ``…_gpu_…`` run."""
    if os.environ.get(ENV_DEVICE, "").upper() == "GPU" and not has_gpu():
        raise RuntimeError(
            f"this is a GPU run ({ENV_DEVICE}=GPU), but {framework} sees no GPU here (a CPU build, "
            "or no usable driver); not profiling the CPU under a GPU run's name. Run the command with "
            "an interpreter whose framework has GPU support"
        )


def index_recorded(run_dir: str, index: bool | str) -> None:
    """Add what was just recorded to the shared index of ``index`` (a logdir; True: the run
    folder's parent), so the training job leaves its parsed tables beside its profile.
    Sessions already indexed are not read again. A failure is printed, never raised: the
    profile is written, and `tb-opcompare index` can be run later."""
    if not index:
        return
    from tb_opcompare.errors import ProfileError
    from tb_opcompare.store.catalog import Catalog
    from tb_opcompare.store.prewarm import index_logdir

    logdir = index if isinstance(index, str) else os.path.dirname(os.path.abspath(run_dir))
    try:
        report = index_logdir(Catalog(logdir), jobs=1, say=lambda _: None)
    except (OSError, ProfileError) as error:
        print(f"tb-opcompare: could not index {logdir}: {error}", file=sys.stderr)
        return
    if report.write_error:
        print(f"tb-opcompare: {report.write_error}", file=sys.stderr)


def profiling_enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


def _settings(run_dir: str | None, model: str | None, batch_size: int | None) -> tuple[str, str | None, int | None]:
    run_dir = run_dir or os.environ.get(ENV_RUN_DIR)
    if not run_dir:
        raise ValueError(f"no run directory: pass one, or set {ENV_RUN_DIR} (tb-opcompare record does)")
    model = model or os.environ.get(ENV_MODEL) or None
    if batch_size is None and os.environ.get(ENV_BATCH_SIZE):
        batch_size = int(os.environ[ENV_BATCH_SIZE])
    return run_dir, model, batch_size


def _repeat_from_environment() -> int | None:
    """Which repeat of one configuration this run is, when ``tb-opcompare record --repeats``
    runs it several times."""
    value = os.environ.get(ENV_REPEAT, "")
    return int(value) if value.isascii() and value.isdigit() and int(value) > 0 else None


def _matrix_from_environment(**given) -> dict:
    """Sidecar fields for the cell of ``tb-opcompare record --matrix`` this run is: its
    precision and compiler. What the training script passed itself (``given``, where not
    None) wins."""
    try:
        cell = json.loads(os.environ.get(ENV_MATRIX) or "{}")
    except ValueError:
        cell = {}
    fields = {
        MATRIX_FACTS[dimension]: str(value)
        for dimension, value in (cell.items() if isinstance(cell, dict) else ())
        if dimension in MATRIX_FACTS
    }
    fields.update({field: value for field, value in given.items() if value is not None})
    return fields


# ---------------------------------------------------------------------------------------------
# TensorFlow


def _tf_device() -> tuple[str, str | None]:
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return "CPU", None
    details = tf.config.experimental.get_device_details(gpus[0])
    return "GPU", details.get("device_name")


class _TfSession:
    """Profiles steps ``first`` .. ``first + steps - 1`` and marks every step inside."""

    def __init__(self, run_dir, model, batch_size, first_step, steps, precision=None, compiler=None):
        import tensorflow as tf

        _refuse_a_gpu_run_without_a_gpu(f"TensorFlow {tf.__version__}", lambda: _tf_device()[0] == "GPU")
        self.run_dir, self.model, self.batch_size = run_dir, model, batch_size
        self.facts = _matrix_from_environment(precision=precision, compiler=compiler)
        self.first, self.last = first_step, first_step + steps - 1
        self.active = False
        self.done = False

    def begin(self, step: int):
        import tensorflow as tf

        if not self.done and not self.active and step >= self.first:
            tf.profiler.experimental.start(self.run_dir)
            self.active = True
        if self.active:
            marker = tf.profiler.experimental.Trace("train", step_num=step, _r=1)
            marker.__enter__()
            return marker
        return None

    def end(self, step: int, marker) -> None:
        if marker is not None:
            marker.__exit__(None, None, None)
        if self.active and step >= self.last:
            self.stop()

    def stop(self) -> None:
        import tensorflow as tf

        if self.active:
            tf.profiler.experimental.stop()
            self.active, self.done = False, True

    def write_sidecar(self) -> None:
        import tensorflow as tf

        device, name = _tf_device()
        versions = {"tensorflow": tf.__version__}
        try:
            import keras

            versions["keras"] = keras.__version__
        except ImportError:
            pass
        write_sidecar(
            self.run_dir,
            model=self.model,
            batch_size=self.batch_size,
            device=device,
            device_name=name,
            framework=f"TensorFlow {tf.__version__}",
            versions=versions,
            repeat=_repeat_from_environment(),
            extra={"profiled_steps": [self.first, self.last], **self.facts},
        )


class _NoStep:
    """What every helper yields when profiling is off: ``with profiler.step(i):`` and
    ``profiler.step()`` both do nothing."""

    def step(self, step: int | None = None):
        return contextlib.nullcontext()


class _TfStepper:
    def __init__(self, session: _TfSession):
        self._session = session

    @contextlib.contextmanager
    def step(self, step: int):
        marker = self._session.begin(step)
        try:
            yield
        finally:
            self._session.end(step, marker)


@contextlib.contextmanager
def tf_profile(
    run_dir: str | None = None,
    *,
    model: str | None = None,
    batch_size: int | None = None,
    first_step: int = DEFAULT_FIRST_STEP,
    steps: int = DEFAULT_STEPS,
    precision: str | None = None,
    compiler: str | None = None,
    index: bool | str = False,
) -> Iterator:
    """Profile steps ``first_step`` .. ``first_step + steps - 1`` of a custom TF loop;
    wrap each step in ``profiler.step(step_number)``. ``precision`` and ``compiler``
    (what the script asked for, e.g. ``"bf16"``, ``"xla"``) go to the sidecar.
    ``index``: add the run to a logdir's shared index (True: the run folder's parent)."""
    if not profiling_enabled():
        yield _NoStep()
        return
    session = _TfSession(*_settings(run_dir, model, batch_size), first_step, steps, precision, compiler)
    try:
        yield _TfStepper(session)
    finally:
        session.stop()
        session.write_sidecar()
    index_recorded(session.run_dir, index)


def KerasProfiler(
    run_dir: str | None = None,
    *,
    model: str | None = None,
    batch_size: int | None = None,
    first_step: int = DEFAULT_FIRST_STEP,
    steps: int = DEFAULT_STEPS,
    precision: str | None = None,
    compiler: str | None = None,
    index: bool | str = False,
):
    """A Keras callback that profiles training batches ``first_step`` ..
    ``first_step + steps - 1`` of the first epoch, with a step marker per batch (Keras 3
    writes none), and writes the sidecar when training ends. Keras does not tell a
    callback the batch size: pass it (or let ``tb-opcompare record`` set it), else it
    comes from the run name. ``precision`` and ``compiler`` go to the sidecar. ``index``:
    add the run to a logdir's shared index when training ends (True: the run folder's
    parent)."""
    import tensorflow as tf

    if not profiling_enabled():
        return tf.keras.callbacks.Callback()
    session = _TfSession(*_settings(run_dir, model, batch_size), first_step, steps, precision, compiler)

    class _KerasProfiler(tf.keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self._marker = None
            self._epoch = 0

        def on_epoch_begin(self, epoch, logs=None):
            self._epoch = epoch

        def on_train_batch_begin(self, batch, logs=None):
            if self._epoch == 0:
                self._marker = session.begin(batch)

        def on_train_batch_end(self, batch, logs=None):
            if self._epoch == 0:
                session.end(batch, self._marker)
                self._marker = None

        def on_train_end(self, logs=None):
            session.stop()
            session.write_sidecar()
            index_recorded(session.run_dir, index)

    return _KerasProfiler()


# ---------------------------------------------------------------------------------------------
# PyTorch


class _TorchStepper:
    def __init__(self, profiler):
        self._profiler = profiler

    def step(self) -> None:
        self._profiler.step()


@contextlib.contextmanager
def torch_profile(
    run_dir: str | None = None,
    *,
    model: str | None = None,
    batch_size: int | None = None,
    wait: int = 1,
    warmup: int = 2,
    active: int = DEFAULT_STEPS,
    profile_memory: bool = True,
    with_stack: bool = False,
    with_flops: bool = False,
    precision: str | None = None,
    compiler: str | None = None,
    index: bool | str = False,
) -> Iterator:
    """``torch.profiler`` over ``active`` steps after ``wait + warmup``, written with
    ``tensorboard_trace_handler`` and ``record_shapes=True`` (so the batch size is read
    from the data); call ``profiler.step()`` at the end of every training step.

    ``profile_memory`` (on by default: on small models it costs a few percent of trace size)
    records every allocation, so memory per op can be compared; ``with_stack`` records the
    Python calls, whose ``nn.Module`` frames give the module tree (traces grow several
    times); ``with_flops`` asks PyTorch for its FLOPs per matrix op and convolution (the
    roofline's work, where the trace keeps it; else the work is counted from the shapes).
    ``precision`` (e.g. ``"bf16"``, what autocast was asked for) and ``compiler``
    (``"torch.compile"``) go to the sidecar. ``index``: add the run to a logdir's shared
    index (True: the run folder's parent)."""
    if not profiling_enabled():
        yield _NoStep()
        return
    import torch

    run_dir, model, batch_size = _settings(run_dir, model, batch_size)
    activities = [torch.profiler.ProfilerActivity.CPU]
    on_gpu = torch.cuda.is_available()
    _refuse_a_gpu_run_without_a_gpu(f"PyTorch {torch.__version__}", lambda: on_gpu)
    if on_gpu:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(
        activities=activities,
        schedule=torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(run_dir),
        record_shapes=True,
        profile_memory=profile_memory,
        with_stack=with_stack,
        with_flops=with_flops,
    ) as profiler:
        yield _TorchStepper(profiler)
    extra = {
        "profiled_steps": [wait + warmup, wait + warmup + active - 1],
        "profile_memory": profile_memory,
        "with_stack": with_stack,
        "with_flops": with_flops,
        **_matrix_from_environment(precision=precision, compiler=compiler),
    }
    _write_torch_sidecar(run_dir, model, batch_size, on_gpu, extra)
    index_recorded(run_dir, index)


def _write_torch_sidecar(run_dir: str, model: str | None, batch_size: int | None, on_gpu: bool, extra: dict) -> None:
    import torch

    write_sidecar(
        run_dir,
        model=model,
        batch_size=batch_size,
        device="GPU" if on_gpu else "CPU",
        device_name=torch.cuda.get_device_name(0) if on_gpu else None,
        framework=f"PyTorch {torch.__version__}",
        versions={"torch": torch.__version__},
        repeat=_repeat_from_environment(),
        extra={key: value for key, value in extra.items() if value is not None},
    )


# ---------------------------------------------------------------------------------------------
# ONNX Runtime


@contextlib.contextmanager
def onnxruntime_profile(
    model_path: str,
    run_dir: str | None = None,
    *,
    model: str | None = None,
    batch_size: int | None = None,
    providers: list[str] | None = None,
    session_options=None,
    precision: str | None = None,
) -> Iterator:
    """An ONNX Runtime ``InferenceSession`` of ``model_path`` (an ``.onnx`` file) with ONNX
    Runtime's own profiler on: each ``session.run`` is a profiled step, written on leaving
    the block to ``<run_dir>/onnxruntime_profile_<date>.json`` with the sidecar. For
    comparing a model exported from PyTorch or TensorFlow with its framework's own runs:
    the op names differ by design, and the compare meets them at the whole step.

    ONNX Runtime profiles a session from its start and cannot pause, so warm-up runs are
    steps of the profile too (the matrix leaves out slow leading steps). ``providers``
    defaults to the CPU's; ``session_options`` are the caller's, profiling added."""
    import onnxruntime

    from tb_opcompare.ingest.readers.onnxruntime_json import device_of_providers

    providers = providers or ["CPUExecutionProvider"]
    if not profiling_enabled():
        yield onnxruntime.InferenceSession(model_path, session_options, providers=providers)
        return
    run_dir, model, batch_size = _settings(run_dir, model, batch_size)
    os.makedirs(run_dir, exist_ok=True)
    options = session_options or onnxruntime.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(run_dir, "onnxruntime_profile")
    session = onnxruntime.InferenceSession(model_path, options, providers=providers)
    on_gpu = device_of_providers(session.get_providers()) == "GPU"
    _refuse_a_gpu_run_without_a_gpu(f"ONNX Runtime {onnxruntime.__version__}", lambda: on_gpu)
    try:
        yield session
    finally:
        session.end_profiling()
    extra = {
        "providers": session.get_providers(),
        **_matrix_from_environment(precision=precision, compiler="ONNX Runtime"),
    }
    write_sidecar(
        run_dir,
        model=model,
        batch_size=batch_size,
        device="GPU" if on_gpu else "CPU",
        device_name=None,
        framework=f"ONNX Runtime {onnxruntime.__version__}",
        versions={"onnxruntime": onnxruntime.__version__},
        repeat=_repeat_from_environment(),
        extra=extra,
    )
