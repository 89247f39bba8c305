"""From files to per-op tables: finding runs (``discovery``), the formats and their
readers (``formats``, ``readers``), what sidecars and run names claim (``sidecar``,
``naming``) and the facts settled from all of them (``facts``). Nothing here keeps state."""
