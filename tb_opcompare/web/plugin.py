"""The TensorBoard entry point: the "Op Compare" tab.

TensorBoard imports this module and builds the plugin at start-up whether or not the tab
is ever opened, so it imports nothing heavy: the tab's static files are served from
here, and the data routes (``routes.DataRoutes``: the services, the readers, the maths)
are imported and built in a thread once the logdir is seen to hold runs (``_look`` at
start-up, else ``is_active`` when TensorBoard lists its plugins: ``_get_ready``), or on
the first data request if that comes first.
"""

from __future__ import annotations

import logging
import mimetypes
import threading
from typing import TYPE_CHECKING

from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from tb_opcompare.ingest.discovery import has_profile_runs
from tb_opcompare.schema.contract import ROUTES
from tb_opcompare.store.settings import ReadSettings
from tb_opcompare.web import assets

if TYPE_CHECKING:  # the routes are imported on first use (they bring the services)
    from tb_opcompare.web.routes import DataRoutes

_logger = logging.getLogger(__name__)

PLUGIN_NAME = "op_compare"
TAB_NAME = "Op Compare"
DATA_ROUTES = tuple(f"/{name}" for name, _, _ in ROUTES)  # the contract lists every data route once
LOOK_WAIT_SECONDS = 30.0  # how long a listing waits on the start-up look for runs


class OpComparePlugin(base_plugin.TBPlugin):
    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext):
        flags = context.flags
        # the tab's own logdir where given: TensorBoard with TensorFlow installed refuses an
        # s3:// --logdir without tensorflow-io, and the plugin reads buckets itself (fsspec)
        self._logdir = getattr(flags, "opcompare_logdir", None) or context.logdir or ""
        self._settings = ReadSettings.from_options(
            getattr(flags, "opcompare_cache_dir", None),
            False,
            getattr(flags, "opcompare_max_read_gb", 0),
            getattr(flags, "opcompare_cache_max_gb", 0),
        )
        self._active = False
        self._routes: DataRoutes | None = None
        self._routes_lock = threading.Lock()
        self._ready_lock = threading.Lock()  # not the routes': a listing never waits on their build
        self._getting_ready = False
        self._looked = threading.Event()  # the start-up look (``_look``) is over
        if not _started(self._look, "op_compare-look"):
            self._looked.set()

    def is_active(self) -> bool:
        # Once runs exist they rarely vanish; until then look again on every listing so
        # runs written while TensorBoard is up make the tab appear. A listing during the
        # start-up look takes its answer (one walk of a bucket, not two at once).
        if not self._active and self._logdir:
            self._looked.wait(LOOK_WAIT_SECONDS)  # past it, this listing walks for itself
            if not self._active:
                self._active = has_profile_runs(self._logdir)
                if self._active:
                    self._ready_soon()
        return self._active

    def _look(self) -> None:
        """At TensorBoard's start, beside it: whether the logdir holds runs, and if it does,
        the routes made ready (``_ready_soon``). Asked the moment TensorBoard answered its
        plugin listing, a cold compare of the BERT xplane and a Keras CNN waited about 40 ms
        on the imports the listing had set off (medians of 9 with TensorBoard's defaults:
        136-149 ms, against 91-99 ms from here). The imports share the cores with the end of
        TensorBoard's start: a listing asked the moment it can answer comes 25-77 ms later
        (of 2.5-2.7 s). A logdir without runs imports nothing, as before."""
        try:
            if self._logdir and has_profile_runs(self._logdir):
                self._active = True
                self._ready_soon()
        except Exception:  # noqa: BLE001 - the listing looks again and reports as it always did
            _logger.debug("op_compare: looking for runs at start-up failed", exc_info=True)
        finally:
            self._looked.set()

    def _ready_soon(self) -> None:
        """``_get_ready`` in a thread of its own, once for this plugin."""
        with self._ready_lock:
            if self._getting_ready:
                return
            self._getting_ready = _started(self._get_ready, "op_compare-get-ready")

    def _get_ready(self) -> None:
        """The logdir holds runs, so a click on the tab may follow: the data routes and the
        readers (150 ms of imports, a third of a cold first compare of two small xplanes)
        are made ready now, not in that click's answer. Nothing is read, and no pandas is
        imported. A failure here is only logged (at debug): the first data request builds
        the routes again, and fails as it would have."""
        try:
            self.data_routes()
            from tb_opcompare.ingest.formats import import_readers

            import_readers()
        except Exception:  # noqa: BLE001 - the request that needs them reports it
            _logger.debug("op_compare: getting the data routes ready failed", exc_info=True)

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name=TAB_NAME, disable_reload=True)

    def get_plugin_apps(self):
        apps = {f"/{name}": self._static_app(name, assets.frontend_file) for name in assets.frontend_files()}
        apps["/plotly.min.js"] = self._static_app("plotly.min.js", lambda _name: assets.plotly_bundle(), expires=86400)
        apps.update({route: self._data_app(route) for route in DATA_ROUTES})
        return apps

    @property
    def _catalog(self):
        return self.data_routes().catalog

    def data_routes(self):
        """The data routes, built once, on first use."""
        if self._routes is None:
            with self._routes_lock:
                if self._routes is None:
                    from tb_opcompare.web.routes import DataRoutes

                    self._routes = DataRoutes(self._logdir, self._settings)
        return self._routes

    @staticmethod
    def _static_app(name: str, read, expires: int = 0):
        content_type = "text/javascript" if name.endswith(".js") else mimetypes.guess_type(name)[0]

        @wrappers.Request.application
        def serve(request):
            return http_util.Respond(request, read(name), content_type, expires=expires)

        return serve

    def _data_app(self, route: str):
        def serve(environ, start_response):
            return self.data_routes().apps[route](environ, start_response)

        return serve


def _started(work, name: str) -> bool:
    """Whether a daemon thread running ``work`` started (a process at its limit of threads
    starts none: the first request then does the work, as it would have)."""
    try:
        threading.Thread(target=work, name=name, daemon=True).start()
    except RuntimeError:
        return False
    return True


class OpCompareLoader(base_plugin.TBLoader):
    """Entry point for TensorBoard (``tensorboard_plugins`` in pyproject.toml)."""

    def define_flags(self, parser):
        group = parser.add_argument_group("op_compare")
        group.add_argument(
            "--opcompare_logdir",
            metavar="PATH_OR_URL",
            default=None,
            help="Op Compare: the logdir the tab reads, where it is not TensorBoard's --logdir: a folder or a "
            "bucket (s3://, gs://, az://; the tb-opcompare[s3] extra). With TensorFlow installed, TensorBoard "
            "itself asks for tensorflow-io to read an s3:// --logdir; this flag reads the bucket without it.",
        )
        group.add_argument(
            "--opcompare_cache_dir",
            metavar="DIR",
            default=None,
            help="Op Compare: where parsed profiles are kept between starts (default: $TB_OPCOMPARE_CACHE_DIR, "
            "else ~/.cache/tb-opcompare; 'none' keeps them in memory only). Never the logdir.",
        )
        group.add_argument(
            "--opcompare_cache_max_gb",
            metavar="GB",
            type=float,
            default=0,
            help="Op Compare: the most the cache folder may hold; the profiles used longest ago are "
            "deleted past it (default 0: $TB_OPCOMPARE_CACHE_MAX_GB, else 5).",
        )
        group.add_argument(
            "--opcompare_max_read_gb",
            metavar="GB",
            type=float,
            default=0,
            help="Op Compare: refuse to read a trace whose read would need more memory than this "
            "(default 0: half of this machine's memory).",
        )

    def load(self, context):
        return OpComparePlugin(context)
