"""The ``tb-opcompare`` command: the same documents as the tab, for shells, scripts and CI."""
