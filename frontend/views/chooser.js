// Which runs to compare: a suggested pair, or a baseline and a target (and, for a run
// profiled more than once, which capture), whether each run is pooled with its repeats,
// and whether ops are grouped by name or type.
// Suggested pairs come in groups: CPU -> accelerator, and the pairs that differ in
// precision or in compiler only.

import {h} from '../dom.js';
import {COMPARE_GROUP_BY_LABELS, capitalise} from '../format.js';
import {hasRepeats} from '../state.js';
import {SIDES} from './sides.js';

const POOL_TITLE = 'Compare each run pooled with its repeats (the runs of the same model, device, batch size and ' +
  'label): every execution of every repeat counts; p10–p90 spreads are not pooled';
const NO_REPEATS_TITLE = 'Neither run has repeats to pool: record several runs of one configuration with ' +
  '`tb-opcompare record --repeats N`';

/** @typedef {import('../contract.js').RunsDocument} RunsDocument */
/** @typedef {import('../contract.js').RunRecord} RunRecord */
/** @typedef {import('../contract.js').Pair} Pair */
/** @typedef {import('../state.js').Selection} Selection */

/** The pair select's groups, by what a pair's runs differ in, in this order. */
const PAIR_GROUPS = {device: 'CPU → accelerator', precision: 'Precision (fp32 → …)', compiler: 'Compiler (eager → …)'};
/** For a variant pair, the dimension the two runs share, shown where it is not the default. */
const SHARED = {precision: ['compiler', 'eager'], compiler: ['precision', 'fp32']};

/** @param {RunRecord} run */
function runLabel(run) {
  const parts = [run.run, run.device || 'device unknown'];
  if (run.batch_size) parts.push(`bs ${run.batch_size}`);
  if (!run.loaded) parts.push('not read yet');
  return parts.join(' · ');
}

/**
 * A CPU -> accelerator pair as its run names say it.
 * @param {Pair} pair
 */
function devicePairLabel(pair) {
  return `${pair.baseline} → ${pair.target}` + (pair.guess ? ' (a guess: batch sizes unknown)' : '');
}

/**
 * A pair that differs in one dimension as what differs, after what the two runs share:
 * "mnist_cnn_torch · GPU · batch 64: fp32 → bf16" (the shared compiler or precision
 * named where it is not the default). Run names where the records do not say.
 * @param {Pair} pair
 * @param {Map<string, RunRecord>} records
 */
function variantPairLabel(pair, records) {
  const baseline = records.get(pair.baseline);
  const target = records.get(pair.target);
  const from = baseline && baseline[pair.varies];
  const to = target && target[pair.varies];
  if (!from || !to || typeof from !== 'string' || typeof to !== 'string') return devicePairLabel(pair);
  const shared = [pair.model];
  if (baseline.device) shared.push(baseline.device);
  if (pair.batch_size) shared.push(`batch ${pair.batch_size}`);
  const [otherField, otherDefault] = SHARED[pair.varies] || [];
  const other = otherField && baseline[otherField];
  if (other && other !== otherDefault) shared.push(other);
  return `${shared.join(' · ')}: ${from} → ${to}`;
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
    this.groupButtons = Object.entries(COMPARE_GROUP_BY_LABELS).map(([groupBy, label]) =>
      h('button', {class: 'oc-segment', 'data-group-by': groupBy, type: 'button',
                   onclick: () => this.onChange({group_by: groupBy})}, label));
    // Enabled where either run has repeats (showSelection); the choice is kept while not.
    this.poolBox = h('input', {type: 'checkbox', id: 'oc-pool', disabled: true,
                               onchange: () => this.onChange({repeats: this.poolBox.checked})});
    this.poolLabel = h('label', {class: 'oc-check oc-pool oc-disabled', title: NO_REPEATS_TITLE},
                       this.poolBox, 'Pool repeats');
    const sideField = (side, label) =>
      field(label, h('div', {class: 'oc-inline'}, this.runSelects[side], this.sessionSelects[side]));
    this.element = h('section', {class: 'oc-chooser', 'aria-label': 'runs to compare'},
      h('label', {class: 'oc-field oc-field-pair'}, h('span', {class: 'oc-label'}, 'Suggested pair'), this.pairSelect),
      sideField('baseline', 'Baseline'),
      h('button', {class: 'oc-icon-button', id: 'oc-swap', type: 'button', title: 'Swap baseline and target',
                   'aria-label': 'swap baseline and target', onclick: () => this.swap()}, '⇄'),
      sideField('target', 'Target'),
      field('Repeats', h('div', {class: 'oc-inline oc-pool-field'}, this.poolLabel)),
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
    const {runs} = this.listing;
    const pairs = this.suggestedPairs();
    const current = pairs.findIndex((pair) => pair.baseline === selection.baseline && pair.target === selection.target);
    this.pairSelect.replaceChildren(
      h('option', {value: 'custom'}, pairs.length ? 'Custom (choose below)'
        : this.listing.complete ? 'No CPU↔GPU pairs found' : 'Finding pairs…'),
      ...this.pairGroups(pairs));
    this.pairSelect.value = current >= 0 ? String(current) : 'custom';
    // the chosen pair's label in full, where the select is narrower than it
    this.pairSelect.title = this.pairSelect.selectedOptions[0]?.textContent || '';
    for (const side of SIDES) {
      this.runSelects[side].value = selection[side];
      // the whole run label on hover, where the select is narrower than the name (issue 51: "… bs 12…")
      this.runSelects[side].title = this.runSelects[side].selectedOptions[0]?.textContent || '';
      const run = runs.find((candidate) => candidate.run === selection[side]);
      const sessions = run ? [...run.sessions].reverse() : [];
      const select = this.sessionSelects[side];
      select.replaceChildren(...sessions.map((session, i) =>
        h('option', {value: session}, i === 0 ? `${session} (newest)` : session)));
      select.value = selection[`${side}_session`] || sessions[0] || '';
      select.hidden = sessions.length < 2;
    }
    const poolable = hasRepeats(selection, runs);
    this.poolBox.disabled = !poolable;
    this.poolBox.checked = poolable && Boolean(selection.repeats);
    this.poolLabel.classList.toggle('oc-disabled', !poolable);
    this.poolLabel.title = poolable ? POOL_TITLE : NO_REPEATS_TITLE;
    for (const button of this.groupButtons) {
      button.classList.toggle('oc-active', button.dataset.groupBy === selection.group_by);
      button.setAttribute('aria-pressed', String(button.dataset.groupBy === selection.group_by));
    }
  }

  /**
   * Every suggested pair, the CPU -> accelerator ones first; an option's value is its index.
   * @returns {Pair[]}
   */
  suggestedPairs() {
    const {pairs, variant_pairs: variantPairs} = this.listing;
    return [...pairs, ...(variantPairs || [])];
  }

  /**
   * The options of `pairs`, grouped by what the two runs differ in; within a group, by
   * model, device and batch size, the defaults of the shared dimension first.
   * @param {Pair[]} pairs
   */
  pairGroups(pairs) {
    const records = new Map(this.listing.runs.map((run) => [run.run, run]));
    const groups = new Map(Object.keys(PAIR_GROUPS).map((varies) => [varies, []]));
    pairs.forEach((pair, index) => {
      const varies = pair.varies || 'device';
      const label = varies === 'device' ? devicePairLabel(pair) : variantPairLabel(pair, records);
      if (!groups.has(varies)) groups.set(varies, []);
      groups.get(varies).push({pair, index, label, device: records.get(pair.baseline)?.device || ''});
    });
    const byRuns = (a, b) => (a.pair.model || '').localeCompare(b.pair.model || '') || a.device.localeCompare(b.device) ||
      (a.pair.batch_size ?? Infinity) - (b.pair.batch_size ?? Infinity) || a.label.length - b.label.length ||
      a.label.localeCompare(b.label);
    return [...groups].filter(([, entries]) => entries.length).map(([varies, entries]) =>
      h('optgroup', {label: PAIR_GROUPS[varies] || capitalise(varies), 'data-varies': varies},
        ...(varies === 'device' ? entries : [...entries].sort(byRuns)).map(({pair, index, label}) =>
          h('option', {value: String(index), title: `${pair.baseline} → ${pair.target}`}, label))));
  }

  choosePair(value) {
    if (value === 'custom') return;
    const pair = this.suggestedPairs()[Number(value)];
    this.onChange({baseline: pair.baseline, target: pair.target, baseline_session: null, target_session: null});
  }

  swap() {
    const {baseline, target, baseline_session: baselineSession, target_session: targetSession} = this.selection;
    this.onChange({baseline: target, target: baseline, baseline_session: targetSession,
                   target_session: baselineSession});
  }
}
