"""The plugin's HTTP routes served in this process, through werkzeug's test client: for
route behaviour that needs no real TensorBoard (parameters, status codes, documents)."""

from __future__ import annotations

import argparse
import threading

from tensorboard.plugins import base_plugin
from werkzeug import test, wrappers

from tb_opcompare.web.plugin import OpCompareLoader

PREFIX = "/data/plugin/op_compare"


def plugin_client(logdir, cache_dir: str | None = None, max_read_gb: float = 0) -> test.Client:
    """A client for the plugin as TensorBoard would build it on ``logdir``: its apps mounted
    under ``/data/plugin/op_compare``. ``cache_dir`` None keeps parsed profiles in memory."""
    flags = argparse.Namespace(opcompare_cache_dir=cache_dir or "none", opcompare_max_read_gb=max_read_gb)
    plugin = OpCompareLoader().load(base_plugin.TBContext(logdir=str(logdir), flags=flags))
    join_getting_ready()
    apps = plugin.get_plugin_apps()

    def dispatch(environ, start_response):
        path = environ.get("PATH_INFO", "")
        route = path[len(PREFIX) :] if path.startswith(PREFIX) else None
        if route not in apps:
            return wrappers.Response("not found", status=404)(environ, start_response)
        return apps[route](environ, start_response)

    return _ClosingClient(dispatch)


def join_getting_ready() -> None:
    """Wait for the plugin's threads of start-up (its look for runs, then the getting ready
    of its routes, which the look starts): a test's requests then run beside none of them."""
    for _ in range(2):
        for thread in threading.enumerate():
            if thread.name.startswith("op_compare-"):
                thread.join(120)


class _ClosingClient(test.Client):
    """A test client whose answers are closed once read, as a WSGI server closes every
    answer it sent (the routes give the collector back then: ``routes._served``), unless a
    test asks for ``buffered=False`` to look at an answer before it is closed."""

    def open(self, *args, buffered: bool = True, **kwargs):
        return super().open(*args, buffered=buffered, **kwargs)
