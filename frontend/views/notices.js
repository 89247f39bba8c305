// Notes and warnings around a comparison: what the logdir lacks, which runs cannot be
// read, and what a comparison does not compare like for like.

import {h} from '../dom.js';
import {SIDES} from './sides.js';

/** @typedef {import('../contract.js').RunError} RunError */
/** @typedef {import('../contract.js').CompareSummary} CompareSummary */

function note(text, attributes = {}) {
  return h('div', {class: 'oc-panel oc-panel-note', ...attributes}, text);
}

/**
 * Notices about the logdir as a whole (e.g. no accelerator run).
 * @param {string[]} notices
 */
export function listingNotices(notices) {
  return notices.map((notice) => note(notice, {id: 'oc-no-accelerator'}));
}

/**
 * The runs that cannot be read, folded; null when every run can.
 * @param {RunError[]} errors
 */
export function runErrorsPanel(errors) {
  if (!errors.length) return null;
  const count = errors.length;
  return h('details', {class: 'oc-panel oc-panel-warning', id: 'oc-run-errors'},
    h('summary', {}, `${count} profile ${count === 1 ? 'run' : 'runs'} could not be read (the others are shown)`),
    h('ul', {}, errors.map((error) => h('li', {}, h('code', {}, error.path), ': ', error.message))));
}

/**
 * @param {CompareSummary} summary
 * @param {string|null} staleLink why the runs shown are not the ones the link named
 */
export function comparisonNotices(summary, staleLink) {
  const notes = [];
  if (staleLink) notes.push(staleLink);
  notes.push(...(summary.notes || []));
  for (const side of SIDES) {
    for (const warning of summary[side].warnings) notes.push(`${summary[side].run}: ${warning}`);
  }
  if (summary.baseline.run === summary.target.run && summary.baseline.session === summary.target.session) {
    notes.push('Baseline and target are the same capture: every speedup is 1×.');
  }
  return notes.map((text) => note(text));
}
