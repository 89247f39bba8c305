// The cards above the charts: the headline, the op time, the op counts and the two runs;
// the other ratios, labelled, out of the first screen.

import {READ_FROM} from '../contract.js';
import {h} from '../dom.js';
import {formatSpeedup, formatTime, splitFromOther} from '../format.js';
import {SIDE_LABELS, sideSwatch} from './sides.js';

/** @typedef {import('../contract.js').CompareSummary} CompareSummary */
/** @typedef {import('../contract.js').RunRecord} RunRecord */
/** @typedef {import('./sides.js').Side} Side */

const NOISY_TITLE = 'matched ops whose per-occurrence time varies widely (CV > 0.5) on either side: their mean, ' +
  'and so their speedup, is unreliable (~ in the table; hover a mean for its spread)';

function speedupCard(title, value, detail, id, tooltip = '') {
  const figure = h('div', {class: 'oc-figure', id}, formatSpeedup(value));
  if (value > 1.02) figure.classList.add('oc-better');
  if (value !== null && value < 0.98) figure.classList.add('oc-worse');
  return h('div', {class: 'oc-card', ...(tooltip ? {title: tooltip} : {})}, h('div', {class: 'oc-card-title'}, title),
           figure,
           h('div', {class: 'oc-card-detail'}, detail));
}

/**
 * The number a user reads first: the step wall time ratio (the same in every view for
 * the same runs), or what stands in for it where a run has no step markers.
 * @param {CompareSummary} summary
 */
function headlineCard(summary) {
  const detail = summary.headline_basis === 'step wall time'
    ? `step wall time${summary.headline_per_sample ? ' per sample' : ''}, median steady step`
    : `${summary.headline_basis}${summary.headline_per_sample ? ' per sample' : ''}: no step markers`;
  const card = speedupCard(summary.headline_per_sample ? 'Speedup per sample' : 'Speedup', summary.headline_speedup,
                           detail, 'oc-headline', summary.headline_text);
  if (summary.headline_basis === 'step wall time') {
    // the two times the figure is the ratio of: per sample where the batch sizes differ
    const per = (side) => summary[`${side}_step_wall_us`] /
      (summary.headline_per_sample ? summary[side].batch_size : 1);
    card.append(h('div', {class: 'oc-card-detail', id: 'oc-step-walls'},
                  `${formatTime(per('baseline'))} → ${formatTime(per('target'))} ` +
                  (summary.headline_per_sample ? 'a sample' : 'a step')));
  }
  return card;
}

/** @param {CompareSummary} summary */
function opsCard(summary) {
  return h('div', {class: 'oc-card'}, h('div', {class: 'oc-card-title'}, 'Ops'),
    h('div', {class: 'oc-counts'},
      h('span', {class: 'oc-better'}, `${summary.faster_ops} faster`),
      h('span', {class: 'oc-worse'}, `${summary.slower_ops} slower`)),
    h('div', {class: 'oc-card-detail'},
      `${summary.baseline_only_ops} only in baseline · ${summary.target_only_ops} only in target`),
    summary.noisy_ops ? h('div', {class: 'oc-card-detail oc-noisy', id: 'oc-noisy-count', title: NOISY_TITLE},
                          `${summary.noisy_ops} noisy (~)`) : '');
}

/**
 * Op time, per step where both runs know their step count, else over the whole profile:
 * each side's time and the summary's op_time_speedup, the one figure beside the headline
 * (all ops, ops on one side included). Not wall time, and labelled so.
 * @param {CompareSummary} summary
 */
function timeCard(summary) {
  const perStep = summary.baseline_time_per_step_us !== null && summary.target_time_per_step_us !== null;
  /** @param {Side} side */
  const timeRow = (side) => h('div', {class: 'oc-kv'}, sideSwatch(side),
    h('span', {class: 'oc-kv-key'}, SIDE_LABELS[side]),
    h('span', {class: 'oc-kv-value'},
      perStep ? `${formatTime(summary[`${side}_time_per_step_us`])} / step` : formatTime(summary[`${side}_total_us`])));
  const figure = h('div', {class: 'oc-figure oc-figure-second', id: 'oc-op-time',
                           title: 'all op time of one run over the other\'s, ops found on one side included: not ' +
                             'wall time (ops on parallel threads add up, time outside ops is missed)'},
                   formatSpeedup(summary.op_time_speedup));
  // titled by what the figure is over (per sample where the batch sizes differ), the rows per step
  const title = {'per sample': 'Op time per sample', 'per step': 'Op time per step'}[summary.op_time_basis] ||
    'Total op time';
  return h('div', {class: 'oc-card'}, h('div', {class: 'oc-card-title'}, title),
    figure, h('div', {class: 'oc-card-detail'}, `all op time, ${summary.op_time_basis}: not wall time`),
    timeRow('baseline'), timeRow('target'));
}

/**
 * The other ratios a comparison has, out of the first screen: each says what it measures.
 * @param {CompareSummary} summary
 */
function otherRatios(summary) {
  const line = (id, value, label) => h('div', {class: 'oc-kv'},
    h('span', {class: 'oc-kv-value', id}, formatSpeedup(value)), h('span', {class: 'oc-kv-key'}, label));
  return h('details', {class: 'oc-card oc-more-ratios', id: 'oc-more-ratios'},
    h('summary', {class: 'oc-card-title'}, 'Other ratios'),
    line('oc-overall', summary.overall_speedup,
         `matched op time, ${summary.overall_speedup_basis}: the ops both runs have, ops on one side left out`),
    line('oc-geomean', summary.geomean_speedup, `geometric mean of the ${summary.matched_ops} matched ops' speedups`));
}

/** @param {RunRecord} run */
function deviceText(run) {
  return run.device_name ? `${run.device} · ${run.device_name}` : run.device;
}

/**
 * "6 runs pooled" where the side is a run group (the compare route's `repeats=1`), the
 * runs in its tooltip; nothing for one run.
 * @param {Side} side
 * @param {string[]|undefined} runs the summary's `baseline_runs` or `target_runs`
 */
function pooledLine(side, runs) {
  if (!runs || runs.length < 2) return '';
  return h('div', {class: 'oc-card-detail oc-pooled', id: `oc-${side}-pooled`,
                   title: `The runs pooled, each its newest capture:\n${runs.join('\n')}`},
           `${runs.length} runs pooled`);
}

/**
 * "2 workers (ranks 0, 1 of 8)" where the run is the ranks of one distributed job read
 * together, each rank's median step in the tooltip; nothing for one process.
 * @param {Side} side
 * @param {RunRecord} run
 */
function workersLine(side, run) {
  const workers = run.workers || [];
  if (!workers.length) return '';
  const ranks = workers.map((worker) => worker.rank).join(', ');
  return h('div', {class: 'oc-card-detail oc-workers', id: `oc-${side}-workers`,
                   title: 'Each rank\'s median step; the run\'s step is its slowest rank\'s, its ops every rank\'s:\n' +
                     workers.map((worker) => `rank ${worker.rank}: ${formatTime(worker.step_time_us)} ` +
                                 `(${worker.file})`).join('\n')},
           `${workers.length} workers (ranks ${ranks} of ${workers[0].world_size})`);
}

/**
 * @param {Side} side
 * @param {RunRecord} run for a run group, its first run's record with the group's steps
 * @param {RunRecord} other the other side's run
 * @param {string[]} [pooled] the runs pooled on this side
 */
function runCard(side, run, other, pooled) {
  // Too long for the card, the start the two names share gives way first: their ends differ.
  const [shared, own] = splitFromOther(run.run, other.run);
  return h('div', {class: 'oc-card oc-run-card'},
    h('div', {class: 'oc-card-title'}, sideSwatch(side), SIDE_LABELS[side]),
    h('div', {class: 'oc-run-name', title: run.run},
      shared && h('span', {class: 'oc-run-shared'}, shared), h('span', {class: 'oc-run-own'}, own)),
    pooledLine(side, pooled),
    workersLine(side, run),
    h('div', {class: 'oc-card-detail'}, deviceText(run)),
    h('div', {class: 'oc-card-detail'},
      run.batch_size ? `batch ${run.batch_size} (from ${run.batch_size_source})` : 'batch size unknown',
      ' · ', run.steps !== null ? `${run.steps} ${run.steps === 1 ? 'step' : 'steps'}` : 'steps unknown',
      ' · ', run.format),
    // a team's index is input like the profiles: a run whose numbers came from it says so
    run.read_from && run.read_from !== READ_FROM.profile &&
      h('div', {class: 'oc-card-detail oc-read-from'}, `read from ${run.read_from}`));
}

/**
 * @param {CompareSummary} summary
 * @returns {HTMLElement[]}
 */
export function summaryCards(summary) {
  // The first screen holds two ratios, each labelled: the headline (step wall time) and op
  // time. The others a comparison has wait, labelled, in "Other ratios".
  return [
    headlineCard(summary),
    timeCard(summary),
    opsCard(summary),
    runCard('baseline', summary.baseline, summary.target, summary.baseline_runs),
    runCard('target', summary.target, summary.baseline, summary.target_runs),
    otherRatios(summary),
  ];
}
