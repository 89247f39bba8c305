// Which runs to compare: a suggested pair, or a baseline and a target (and, for a run
// profiled more than once, which capture), and whether ops are grouped by name or type.

import {h} from '../dom.js';
import {GROUP_BY_LABELS} from '../format.js';
import {SIDES} from './sides.js';

/** @typedef {import('../contract.js').RunsDocument} RunsDocument */
/** @typedef {import('../contract.js').RunRecord} RunRecord */
/** @typedef {import('../state.js').Selection} Selection */

/** @param {RunRecord} run */
function runLabel(run) {
  const parts = [run.run, run.device || 'device unknown'];
  if (run.batch_size) parts.push(`bs ${run.batch_size}`);
  if (!run.loaded) parts.push('not read yet');
  return parts.join(' · ');
}

function field(label, ...controls) {
  return h('div', {class: 'oc-field'}, h('span', {class: 'oc-label'}, label), ...controls);
}

export class RunChooser {
  /** @param {{onChange: (changes: Partial<Selection>) => void}} handlers the user chose */
  constructor({onChange}) {
    this.onChange = onChange;
    this.listing = null;
    this.selection = null;
    this.pairSelect = h('select', {class: 'oc-select', 'aria-label': 'suggested pair',
                                   onchange: () => this.choosePair(this.pairSelect.value)});
    this.runSelects = Object.fromEntries(SIDES.map((side) => [side, this.runSelect(side)]));
    this.sessionSelects = Object.fromEntries(SIDES.map((side) => [side, this.sessionSelect(side)]));
    this.groupButtons = Object.entries(GROUP_BY_LABELS).map(([groupBy, label]) =>
      h('button', {class: 'oc-segment', 'data-group-by': groupBy, type: 'button',
                   onclick: () => this.onChange({group_by: groupBy})}, label));
    const sideField = (side, label) =>
      field(label, h('div', {class: 'oc-inline'}, this.runSelects[side], this.sessionSelects[side]));
    this.element = h('section', {class: 'oc-chooser', 'aria-label': 'runs to compare'},
      h('label', {class: 'oc-field oc-field-pair'}, h('span', {class: 'oc-label'}, 'Suggested pair'), this.pairSelect),
      sideField('baseline', 'Baseline'),
      h('button', {class: 'oc-icon-button', id: 'oc-swap', type: 'button', title: 'Swap baseline and target',
                   'aria-label': 'swap baseline and target', onclick: () => this.swap()}, '⇄'),
      sideField('target', 'Target'),
      field('Group', h('div', {class: 'oc-segments'}, this.groupButtons)));
  }

  runSelect(side) {
    const select = h('select', {class: 'oc-select oc-run', id: `oc-${side}`, 'aria-label': `${side} run`,
                                onchange: () => this.onChange({[side]: select.value, [`${side}_session`]: null})});
    return select;
  }

  sessionSelect(side) {
    const select = h('select', {class: 'oc-select oc-session', id: `oc-${side}-session`,
                                'aria-label': `${side} session`,
                                onchange: () => this.onChange({[`${side}_session`]: select.value})});
    return select;
  }

  /**
   * The runs to choose from; unreadable ones are listed, disabled.
   * @param {RunsDocument} listing
   */
  setListing(listing) {
    this.listing = listing;
    for (const select of Object.values(this.runSelects)) {
      select.replaceChildren(
        ...listing.runs.map((run) => h('option', {value: run.run}, runLabel(run))),
        ...listing.errors.map((error) => h('option', {value: error.run, disabled: true}, `${error.run} · unreadable`)));
    }
  }

  /** @param {Selection} selection */
  showSelection(selection) {
    this.selection = selection;
    const {pairs, runs} = this.listing;
    const pairOptions = pairs.map((pair, index) =>
      h('option', {value: String(index)},
        `${pair.baseline} → ${pair.target}` + (pair.guess ? ' (a guess: batch sizes unknown)' : '')));
    const current = pairs.findIndex((pair) => pair.baseline === selection.baseline && pair.target === selection.target);
    this.pairSelect.replaceChildren(
      h('option', {value: 'custom'}, pairs.length ? 'Custom (choose below)' : 'No CPU↔GPU pairs found'),
      ...pairOptions);
    this.pairSelect.value = current >= 0 ? String(current) : 'custom';
    for (const side of SIDES) {
      this.runSelects[side].value = selection[side];
      const run = runs.find((candidate) => candidate.run === selection[side]);
      const sessions = run ? [...run.sessions].reverse() : [];
      const select = this.sessionSelects[side];
      select.replaceChildren(...sessions.map((session, i) =>
        h('option', {value: session}, i === 0 ? `${session} (newest)` : session)));
      select.value = selection[`${side}_session`] || sessions[0] || '';
      select.hidden = sessions.length < 2;
    }
    for (const button of this.groupButtons) {
      button.classList.toggle('oc-active', button.dataset.groupBy === selection.group_by);
      button.setAttribute('aria-pressed', String(button.dataset.groupBy === selection.group_by));
    }
  }

  choosePair(value) {
    if (value === 'custom') return;
    const pair = this.listing.pairs[Number(value)];
    this.onChange({baseline: pair.baseline, target: pair.target, baseline_session: null, target_session: null});
  }

  swap() {
    const {baseline, target, baseline_session: baselineSession, target_session: targetSession} = this.selection;
    this.onChange({baseline: target, target: baseline, baseline_session: targetSession,
                   target_session: baselineSession});
  }
}
