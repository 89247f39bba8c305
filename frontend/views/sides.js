// The two sides of a comparison, each with its colour wherever it is drawn.

import {h} from '../dom.js';

/** @typedef {'baseline'|'target'} Side */

/** @type {Side[]} */
export const SIDES = ['baseline', 'target'];
export const SIDE_COLOURS = {baseline: '#1976d2', target: '#f57c00'};
export const SIDE_LABELS = {baseline: 'Baseline', target: 'Target'};

/** @param {Side} side */
export function sideSwatch(side) {
  return h('span', {class: 'oc-swatch', style: {background: SIDE_COLOURS[side]}});
}
