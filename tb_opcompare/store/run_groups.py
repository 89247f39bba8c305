"""Which runs a request means: a run's name, a comma list of names and shell patterns
(``cnn_cpu_bs16_rep*``), and each run's repeat group (the runs whose sidecar or name gives
the same model, device, batch size and label). The store's rule, shared by every view,
the routes and the CLI."""

from __future__ import annotations

import fnmatch

from tb_opcompare.errors import UnknownRunError
from tb_opcompare.ingest.naming import hardware_from_name
from tb_opcompare.ingest.sidecar import Claims
from tb_opcompare.store.catalog import Catalog
from tb_opcompare.text import natural_key


def split_runs(text: str) -> list[str]:
    """``"a, b,c"`` -> ``["a", "b", "c"]``: the run lists of the CLI and the routes."""
    return [run.strip() for run in text.split(",") if run.strip()]


def side_runs(catalog: Catalog, text: str, repeats: bool = False, groups: dict | None = None) -> list[str]:
    """The runs a side names: a run's exact name (commas and all), else a comma list of
    names and shell patterns (``expand_runs``), with each run's repeats where asked
    (``groups``: the logdir's ``repeat_groups``, where the caller has them already)."""
    names = {source.run for source in catalog.sources()}
    return expand_runs(catalog, [text] if text in names else split_runs(text), repeats, groups)


def both_sides(
    catalog: Catalog, baseline: str | list[str], target: str | list[str], repeats: bool = False
) -> tuple[list[str], list[str]]:
    """The runs of a pair's two sides, each a side's text (``side_runs``) or its runs
    (``expand_runs``), the logdir's repeat groups found once for both: each is every run's
    sidecar, read and settled."""
    groups = logdir_repeat_groups(catalog) if repeats else None
    return _side(catalog, baseline, repeats, groups), _side(catalog, target, repeats, groups)


def one_side(catalog: Catalog, side: str | list[str], repeats: bool = False) -> list[str]:
    """The runs of one side, as ``both_sides`` finds them (a side kept in a logdir of its
    own: ``check``'s stored baseline)."""
    return _side(catalog, side, repeats, logdir_repeat_groups(catalog) if repeats else None)


def _side(catalog: Catalog, side: str | list[str], repeats: bool, groups: dict | None) -> list[str]:
    return (
        expand_runs(catalog, side, repeats, groups)
        if isinstance(side, list)
        else side_runs(catalog, side, repeats, groups)
    )


def logdir_repeat_groups(catalog: Catalog) -> dict[str, list[str]]:
    """``repeat_groups`` of every run of the logdir, found once a listing."""
    return catalog.per_listing(
        "repeat groups", lambda: repeat_groups({source.run: catalog.claims(source) for source in catalog.sources()})
    )


def expand_runs(catalog: Catalog, runs: list[str], repeats: bool = False, groups: dict | None = None) -> list[str]:
    """The runs of a side: names as given, shell patterns (``cnn_cpu_bs16_rep*``) expanded
    against the logdir's runs, and with ``repeats`` each run's repeat group (the runs
    whose sidecar or name gives the same model, device, batch size and label, each a
    repeat; ``groups`` where the caller has them), without duplicates, in the order found.
    An unknown name or a pattern that matches nothing raises UnknownRunError."""
    names = [source.run for source in catalog.sources()]
    expanded: list[str] = []
    known = set(names)
    for item in runs:
        if item not in known and any(char in item for char in "*?["):  # a run's own name is never a pattern
            matched = fnmatch.filter(names, item)
            if not matched:
                raise UnknownRunError(f"no run matches {item!r}", names)
            expanded += sorted(matched, key=natural_key)  # rep2 before rep10
        else:
            expanded.append(catalog.source(item).run)
    if repeats:
        groups = logdir_repeat_groups(catalog) if groups is None else groups
        expanded = [other for run in expanded for other in groups.get(run, [run])]
    return list(dict.fromkeys(expanded))


def repeat_groups(claims: dict[str, Claims]) -> dict[str, list[str]]:
    """Each repeated run's repeat group, from every run's claims: the runs whose sidecar
    or name gives the same model, device (and accelerator model), batch size and label,
    each a repeat (itself included; runs without a repeat are in none)."""
    configuration = {
        run: (*_configuration(claimed), claimed.device_name or hardware_from_name(run))
        for run, claimed in claims.items()
        if claimed.repeat is not None
    }
    members: dict[tuple, list[str]] = {}
    for run, key in configuration.items():
        members.setdefault(key, []).append(run)
    return {run: members[key] for run, key in configuration.items()}


def _configuration(claims) -> tuple:
    # with the accelerator's model (the sidecar's, else the name's, beside this): repeats on
    # an H100 and on an H200 are two configurations
    return claims.model, claims.device, claims.batch_sizes[0][0] if claims.batch_sizes else None, claims.label
