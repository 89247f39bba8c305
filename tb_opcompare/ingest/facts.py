"""A run's facts settled: what its profile measured, then what its sidecar and name claim.

The order of trust is data, then sidecar, then name; where a claim disagrees with the
data, the user is told which source won and why."""

from __future__ import annotations

import dataclasses

from tb_opcompare.analysis.step_time import evidenced_batch_size
from tb_opcompare.ingest.sidecar import NAME_SOURCE, SIDECAR_SOURCE, Claims
from tb_opcompare.schema.dimensions import same_dimension
from tb_opcompare.schema.events import ARGUMENT_SOURCE, ProfileFacts

WEAK_AGREEMENT = 0.75  # below this share of the evidence (against the runner-up), a sidecar or run name wins
_SAID_BY = {SIDECAR_SOURCE: "the sidecar opcompare.json", NAME_SOURCE: "the run name"}


def _said_by(source: str | None) -> str | None:
    """Who a claim of this source is, in words; None for no source."""
    return None if source is None else _SAID_BY.get(source)


def facts_argument(facts: ProfileFacts) -> str:
    """What the argument a batch size came from is, in words (its source without the prefix)."""
    return (facts.batch_size_source or "")[len(ARGUMENT_SOURCE) :]


def claimed_facts(file_format: str, claims: Claims) -> ProfileFacts:
    """What is known of a run before its trace is read: its sidecar, then its name."""
    batch_size, batch_size_source = claims.batch_sizes[0] if claims.batch_sizes else (None, None)
    return ProfileFacts(
        format=file_format,
        device=claims.device,
        device_name=claims.device_name if claims.device not in (None, "CPU") else None,
        steps_source=None,
        batch_size=batch_size,
        batch_size_source=batch_size_source,
        precision=claims.precision,
        precision_source=_said_by(claims.precision_source),
        compiler=claims.compiler,
        compiler_source=_said_by(claims.compiler_source),
        warnings=[claims.warning] if claims.warning else [],
    )


def settle_facts(measured: ProfileFacts, claims: Claims) -> ProfileFacts:
    """The facts to show for a run (a copy; ``measured`` is left alone). Batch size: the
    profile's tensors, then the sidecar, then the run name; a claim that disagrees with
    the measured size is shown as a warning. Device: the profile (a device plane with
    activity); a sidecar that says otherwise gets a warning. Precision and compiler: the
    profile, then the sidecar; a sidecar that disagrees gets a warning."""
    facts = dataclasses.replace(measured, warnings=list(measured.warnings))
    if claims.warning:
        facts.warnings.append(claims.warning)
    weak = facts.batch_size_agreement is not None and facts.batch_size_agreement < WEAK_AGREEMENT
    disagreeing = [(size, by) for size, by in claims.batch_sizes if size != facts.batch_size]
    argument = facts.batch_size is not None and evidenced_batch_size(facts.batch_size, facts.batch_size_source) is None
    if facts.batch_size is None and claims.batch_sizes:
        facts.batch_size, facts.batch_size_source = claims.batch_sizes[0]
    elif argument and claims.batch_sizes:  # measured shapes > sidecar > run name > an argument
        passed, how = facts.batch_size, facts_argument(facts)
        facts.batch_size, facts.batch_size_source = claims.batch_sizes[0]
        if passed != facts.batch_size:
            facts.warnings.append(
                f"the profile holds batch size {passed} only as {how}, which Keras ignores for a "
                f"batched dataset; using {facts.batch_size} from "
                f"{_SAID_BY[facts.batch_size_source]}"
            )
    elif weak and claims.batch_sizes and claims.batch_sizes[0] in disagreeing:  # the most trusted claim decides
        measured_size, agreement = facts.batch_size, facts.batch_size_agreement
        facts.batch_size, claimed_by = claims.batch_sizes[0]
        facts.batch_size_source, facts.batch_size_agreement = claimed_by, None
        facts.warnings.append(
            f"the profile's tensors weakly suggest batch size {measured_size} (only {agreement:.0%} "
            f"of the evidence agrees); using {facts.batch_size} from {_SAID_BY[claimed_by]}"
        )
    else:
        for size, claimed_by in disagreeing:
            facts.warnings.append(
                f"{_SAID_BY[claimed_by]} says batch size {size} but the profile's tensors say "
                f"{facts.batch_size}; using the measured size"
            )
    if claims.device_source == SIDECAR_SOURCE and claims.device != facts.device:
        facts.warnings.append(
            f"the sidecar opcompare.json says {claims.device} but the profile shows "
            f"{facts.device} activity only; using the profile"
        )
    if facts.device_name is None and claims.device_name and facts.device != "CPU":
        facts.device_name = claims.device_name
    for fact, claimed, source in (
        ("precision", claims.precision, claims.precision_source),
        ("compiler", claims.compiler, claims.compiler_source),
    ):
        if not claimed or source is None:  # nothing claimed (a claim always has its source)
            continue
        measured_value = getattr(facts, fact)
        if measured_value is None:
            setattr(facts, fact, claimed)
            setattr(facts, f"{fact}_source", _SAID_BY[source])
        elif measured_value and not same_dimension(fact, claimed, measured_value):
            facts.warnings.append(
                f"{_SAID_BY[source]} says {fact} {claimed} but the profile shows {measured_value}; using the profile"
            )
    return facts
