// The tab's state, and the one place it is read from and written to parameters: the URL
// hash (so reload and shared links restore the view) and the routes' query strings,
// which name the view the same way (the server's compare route takes q, status, side,
// min_us, sort, order and top).
//
// TensorBoard's own hash (#op_compare) carries the state, with keys prefixed
// "p.op_compare." as TensorBoard's plugin library does. Inside a frame we cannot reach,
// the frame's own hash is used. TensorBoard drops our keys when the user visits another
// of its tabs and comes back, so the last state is also kept in the browser tab's
// sessionStorage, and put back into the hash from there.

import {COMPARE_PAGE, PLOT_TOP, SERIES_DIMENSIONS, TREND_ORDERS} from './contract.js';
import {STATUSES} from './view.js';

/** @typedef {import('./view.js').RowView} RowView */

/**
 * The runs compared; null sessions mean each run's newest.
 * @typedef {Object} Selection
 * @property {string|null} baseline
 * @property {string|null} target
 * @property {string|null} baseline_session
 * @property {string|null} target_session
 * @property {'name'|'type'|'module'} group_by
 * @property {boolean} repeats the Compare page pools each run with its repeats (the compare
 *   route's `repeats=1`: the server decides which runs pool, and its summary names them);
 *   kept while the runs chosen have no repeats, for the next pair that has
 */

/**
 * @typedef {Object} SweepState
 * @property {string|null} model
 * @property {number} top how many ops to plot
 * @property {'name'|'type'} group_by
 * @property {'device'|'precision'|'compiler'} series_by what the lines are drawn by
 * @property {string|null} device the device held where the lines are not devices (null: the
 *   server's choice, the device most runs were recorded on)
 */

/**
 * How the sweep's fits table is ordered and filtered.
 * @typedef {Object} FitsView
 * @property {string} sort a fits column
 * @property {'asc'|'desc'} order
 * @property {string} op_contains substring of the op, any case
 */

/**
 * The Trend view: a model's top ops across many runs, in a chosen order.
 * @typedef {Object} TrendState
 * @property {string|null} runs comma list of run names or shell patterns, as typed; null:
 *   the runs of the baseline's model (derived when shown, so not kept in the link)
 * @property {string} order_by `recorded`, `label`, `run`, `repeat` or `sidecar:FIELD`
 * @property {number} top how many ops to plot
 * @property {'name'|'type'} group_by
 */

/**
 * The Matrix view: step latency and throughput of every model, precision, compiler and
 * batch size on every device.
 * @typedef {Object} MatrixState
 * @property {string|null} reference the reference column's key; null: the route's default
 *   (the CPU where present)
 * @property {number|null} warmup leading steps dropped from every run; null: detected per run
 * @property {string|null} part a part of the step (a key of STEP_PARTS) each cell shows too; null: none
 */

/**
 * The Layers page's rows table: its order and filter (the runs are the selection's).
 * @typedef {Object} LayersState
 * @property {string|null} sort a rows column; null: the route's order (the larger first)
 * @property {'asc'|'desc'} order
 * @property {string} q the rows whose name or kind holds this (any case)
 */

/**
 * The Memory page's op table: its order and filter (the runs are the selection's).
 * @typedef {Object} MemoryState
 * @property {string|null} sort a column of the table; null: the route's order (the largest allocation first)
 * @property {'asc'|'desc'} order
 * @property {string} q the ops whose name holds this (any case)
 */

/**
 * @typedef {Object} TabState
 * @property {'compare'|'sweep'|'trend'|'matrix'|'modules'|'layers'|'memory'|'roofline'} page the page shown; `modules`
 *   compares the module trees of the selection's runs, `layers` their application,
 *   framework, runtime and device time
 * @property {Selection} selection
 * @property {RowView} view
 * @property {boolean} significant the op table shows only the ops the Confidence check
 *   finds significantly changed (their keys come from the check, never from the link)
 * @property {SweepState} sweep
 * @property {TrendState} trend
 * @property {MatrixState} matrix
 * @property {MemoryState} memory
 * @property {LayersState} layers
 */

/** @typedef {Object<string, string|undefined>} Params parameters by name, as text */

const HASH_PREFIX = 'p.op_compare.';
// The most compare rows the tab holds: a million-op comparison was one 858 MB answer, and
// TensorBoard's process reached 3.6 GB making it. Past this the server filters and orders
// every row and the tab shows the first MAX_TAB_ROWS (the CSV holds them all): the compare
// route's own page, as the server declares it.
export const MAX_TAB_ROWS = COMPARE_PAGE.rows;
// the sweep and trend routes' `top`: its default and bound, as the server declares them
export const DEFAULT_SWEEP_TOP = PLOT_TOP.default;
export const MAX_SWEEP_TOP = PLOT_TOP.max;
export const DEFAULT_TREND_TOP = PLOT_TOP.default;
export const DEFAULT_TREND_ORDER = 'recorded';
/** The trend route's orders, but for `sidecar:FIELD`. */
export {TREND_ORDERS};
export const SIDECAR_ORDER = 'sidecar:';

/** How many ops to plot, within what the sweep route takes; null for text that is no number. */
export function sweepTop(text) {
  const value = positiveInteger(text);
  return value === null ? null : Math.min(MAX_SWEEP_TOP, value);
}

/** @returns {number|null} */
export function positiveInteger(text) {
  const value = parseInt(text, 10);
  return value > 0 ? value : null;
}

/**
 * Warm-up steps as the matrix route takes them: digits only (0 or more); null for
 * anything else, empty included (the route then detects each run's warm-up).
 * @param {string|number|null|undefined} text
 * @returns {number|null}
 */
export function warmupSteps(text) {
  const trimmed = String(text ?? '').trim();
  return /^[0-9]+$/.test(trimmed) ? parseInt(trimmed, 10) : null;
}

/** The known statuses among `statuses`; none means all. */
export function statusesOrAll(statuses) {
  const known = statuses.filter((status) => STATUSES.includes(status));
  return known.length ? known : [...STATUSES];
}

function groupBy(text, allowed = ['name', 'type']) {
  return allowed.includes(text) ? text : 'name';
}

/**
 * The `key` parameter's op keys: repeated in a query string (op names may hold commas),
 * so an array, or one string; empty values left out, none means every key.
 * @param {string|string[]|undefined} value
 * @returns {string[]|null}
 */
export function keysFromParam(value) {
  const keys = [...new Set((Array.isArray(value) ? value : [value]).filter((key) => key))];
  return keys.length ? keys : null;
}

/**
 * The row view from parameters named as the compare route names them.
 * @param {Object<string, string|string[]|undefined>} params `key` may be repeated
 * @returns {RowView}
 */
export function viewFromParams(params) {
  const minimum = parseFloat(params.min_us);
  return {
    q: params.q || '',
    status: statusesOrAll(params.status ? params.status.split(',') : []),
    side: ['host', 'device'].includes(params.side) ? params.side : 'all',
    min_us: minimum > 0 ? minimum : 0,
    sort: params.sort || null,
    order: params.order === 'asc' ? 'asc' : 'desc',
    top: positiveInteger(params.top),
    keys: keysFromParam(params.key),
  };
}

/**
 * The compare route's view parameters; defaults are left out. `key` is an array, one
 * parameter per key (api.js repeats it).
 * @param {RowView} view
 * @returns {Object<string, string|string[]>}
 */
export function viewParams(view) {
  const params = {};
  if (view.keys && view.keys.length) params.key = [...view.keys];
  if (view.q) params.q = view.q;
  if (view.status.length < STATUSES.length) params.status = view.status.join(',');
  if (view.side !== 'all') params.side = view.side;
  if (view.min_us) params.min_us = String(view.min_us);
  if (view.sort) {
    params.sort = view.sort;
    params.order = view.order;
  }
  if (view.top) params.top = String(view.top);
  return params;
}

/**
 * The compare route's run parameters (and its CSV's).
 * @param {Selection} selection
 * @param {boolean} [pool] whether to ask for each run pooled with its repeats: the
 *   selection's choice unless told (the Compare page asks only where the runs have repeats,
 *   `hasRepeats`)
 * @returns {Object<string, string>}
 */
export function selectionParams(selection, pool = selection.repeats) {
  const params = {baseline: selection.baseline, target: selection.target, group_by: selection.group_by};
  if (selection.baseline_session) params.baseline_session = selection.baseline_session;
  if (selection.target_session) params.target_session = selection.target_session;
  if (pool) params.repeats = '1';
  return params;
}

/**
 * Whether "Pool repeats" applies to the selection: either run is one recording of several
 * (its record has a `repeat`, `tb-opcompare record --repeats N`). Which runs pool with it
 * is the server's rule; the compare summary's `baseline_runs` and `target_runs` say.
 * @param {Selection} selection
 * @param {import('./contract.js').RunRecord[]} runs the runs document's
 */
export function hasRepeats(selection, runs) {
  return runs.some((run) => (run.run === selection.baseline || run.run === selection.target) &&
    run.repeat_runs > 1);
}

/**
 * The check route's parameters for the runs compared: each run pooled with its repeats.
 * The route reads each run's newest capture (it takes no session).
 * @param {Selection} selection
 * @returns {Object<string, string>}
 */
export function checkParams(selection) {
  return {baseline: selection.baseline, target: selection.target, repeats: '1', group_by: selection.group_by};
}

/**
 * The sweep route's parameters.
 * @param {SweepState} sweep
 * @returns {Object<string, string>}
 */
export function sweepParams(sweep) {
  const params = {model: sweep.model, top: String(sweep.top), group_by: sweep.group_by};
  if (sweep.series_by !== 'device') {
    params.series_by = sweep.series_by;
    if (sweep.device) params.device = sweep.device;
  }
  return params;
}

/**
 * The sweep CSV route's parameters: the sweep's, and the fits table's order and filter,
 * so the file holds the table's rows in the table's order.
 * @param {SweepState} sweep
 * @param {FitsView} fits
 * @returns {Object<string, string>}
 */
export function sweepCsvParams(sweep, fits) {
  const params = {...sweepParams(sweep), sort: fits.sort, order: fits.order};
  if (fits.op_contains) params.op_contains = fits.op_contains;
  return params;
}

/**
 * A trend order as the route takes it; anything else, the default.
 * @param {string|undefined} text
 */
export function trendOrder(text) {
  if (TREND_ORDERS.includes(text)) return text;
  if (text && text.startsWith(SIDECAR_ORDER) && text.trim().length > SIDECAR_ORDER.length) return text.trim();
  return DEFAULT_TREND_ORDER;
}

/**
 * The trend route's parameters.
 * @param {TrendState} trend
 * @param {string} runs the runs to ask for: the state's, or the default ones
 * @returns {Object<string, string>}
 */
export function trendParams(trend, runs) {
  return {runs, order_by: trend.order_by, top: String(trend.top), group_by: trend.group_by};
}

/**
 * The matrix route's parameters (and its CSV's); defaults are left out.
 * @param {MatrixState} matrix
 * @returns {Object<string, string>}
 */
export function matrixParams(matrix) {
  const params = {};
  if (matrix.reference) params.reference = matrix.reference;
  if (matrix.warmup !== null) params.warmup = String(matrix.warmup);
  if (matrix.part) params.part = matrix.part;
  return params;
}

/**
 * The parameters of the routes that read the two runs chosen on Compare (modules,
 * layers, memory, and their CSVs): the runs and their sessions (none: each run's newest
 * capture); null until both runs are chosen.
 * @param {Selection} selection
 * @returns {Object<string, string>|null}
 */
export function pairParams(selection) {
  if (!selection.baseline || !selection.target) return null;
  const params = {baseline: selection.baseline, target: selection.target};
  if (selection.baseline_session) params.baseline_session = selection.baseline_session;
  if (selection.target_session) params.target_session = selection.target_session;
  return params;
}

/**
 * @param {Params} params the hash's parameters, unprefixed
 * @returns {TabState}
 */
export function stateFromParams(params) {
  return {
    // as the link names it: which pages there are, index.js's PAGES says
    page: (params.view || '').trim() || 'compare',
    selection: {baseline: params.baseline || null, target: params.target || null,
                baseline_session: params.baseline_session || null, target_session: params.target_session || null,
                group_by: groupBy(params.group_by, ['name', 'type', 'module']), repeats: params.repeats === '1'},
    // Op keys come from the check at run time, never from a link.
    view: {...viewFromParams(params), keys: null},
    significant: params.significant === '1',
    sweep: {model: params.model || null, top: sweepTop(params.sweep_top) || DEFAULT_SWEEP_TOP,
            group_by: groupBy(params.sweep_group_by),
            series_by: SERIES_DIMENSIONS.includes(params.sweep_series_by) ? params.sweep_series_by : 'device',
            device: (params.sweep_device || '').trim() || null},
    trend: {runs: (params.trend_runs || '').trim() || null, order_by: trendOrder(params.trend_order),
            top: sweepTop(params.trend_top) || DEFAULT_TREND_TOP, group_by: groupBy(params.trend_group_by)},
    matrix: {reference: (params.matrix_reference || '').trim() || null, warmup: warmupSteps(params.matrix_warmup),
             part: (params.matrix_part || '').trim() || null},
    memory: {sort: (params.memory_sort || '').trim() || null, order: params.memory_order === 'asc' ? 'asc' : 'desc',
             q: params.memory_q || ''},
    layers: {sort: (params.layers_sort || '').trim() || null, order: params.layers_order === 'asc' ? 'asc' : 'desc',
             q: params.layers_q || ''},
  };
}

/**
 * The hash's parameters for `state`, unprefixed; defaults are left out. Nothing of the
 * comparison until runs are chosen.
 * @param {TabState} state
 * @returns {Object<string, string>}
 */
export function stateParams(state) {
  const params = state.selection.baseline ? {...selectionParams(state.selection), ...viewParams(state.view)} : {};
  delete params.key; // derived from the check, where the flag asks for it
  if (params.group_by === 'name') delete params.group_by;
  if (state.selection.baseline && state.significant) params.significant = '1';
  if (state.page !== 'compare') params.view = state.page;
  if (state.sweep.model) params.model = state.sweep.model;
  if (state.sweep.top !== DEFAULT_SWEEP_TOP) params.sweep_top = String(state.sweep.top);
  if (state.sweep.group_by !== 'name') params.sweep_group_by = state.sweep.group_by;
  if (state.sweep.series_by !== 'device') params.sweep_series_by = state.sweep.series_by;
  if (state.sweep.device) params.sweep_device = state.sweep.device;
  if (state.trend.runs) params.trend_runs = state.trend.runs;
  if (state.trend.order_by !== DEFAULT_TREND_ORDER) params.trend_order = state.trend.order_by;
  if (state.trend.top !== DEFAULT_TREND_TOP) params.trend_top = String(state.trend.top);
  if (state.trend.group_by !== 'name') params.trend_group_by = state.trend.group_by;
  if (state.matrix.reference) params.matrix_reference = state.matrix.reference;
  if (state.matrix.warmup !== null) params.matrix_warmup = String(state.matrix.warmup);
  if (state.matrix.part) params.matrix_part = state.matrix.part;
  if (state.memory.sort) {
    params.memory_sort = state.memory.sort;
    params.memory_order = state.memory.order;
  }
  if (state.memory.q) params.memory_q = state.memory.q;
  if (state.layers.sort) {
    params.layers_sort = state.layers.sort;
    params.layers_order = state.layers.order;
  }
  if (state.layers.q) params.layers_q = state.layers.q;
  return params;
}

function hashWindow() {
  try {
    void window.parent.location.hash;
    return window.parent;
  } catch (error) {
    return window;
  }
}

/** Our parameters in `hash`, unprefixed. */
function hashParams(hash) {
  const params = {};
  for (const part of hash.replace(/^#/, '').split('&')) {
    const separator = part.indexOf('=');
    if (separator < 0) continue;
    const key = decodeURIComponent(part.slice(0, separator));
    if (key.startsWith(HASH_PREFIX)) params[key.slice(HASH_PREFIX.length)] = decodeURIComponent(part.slice(separator + 1));
  }
  return params;
}

/** Whether `host`'s hash is this tab's: TensorBoard's names the plugin shown first. */
function showsThisTab(host) {
  return host === window || host.location.hash.replace(/^#/, '').split('&')[0] === 'op_compare';
}

// One TensorBoard per origin and path prefix; sessionStorage is per origin and browser tab.
function storageKey(host) {
  return `${HASH_PREFIX}state:${host.location.pathname}`;
}

/** The parameters last written, or none; storage may be off (private modes, policies). */
function savedParams(host) {
  try {
    return JSON.parse(host.sessionStorage.getItem(storageKey(host))) || {};
  } catch (error) {
    return {};
  }
}

function saveParams(host, params) {
  try {
    host.sessionStorage.setItem(storageKey(host), JSON.stringify(params));
  } catch (error) {
    // the hash still holds the state
  }
}

/**
 * The state in the hash; a hash without any of ours (TensorBoard dropped them, or the tab
 * was opened plainly) gives the state last written in this browser tab.
 * @returns {TabState}
 */
export function readHash() {
  const host = hashWindow();
  const params = hashParams(host.location.hash);
  return stateFromParams(Object.keys(params).length ? params : savedParams(host));
}

/** Put `state` in the hash in place of what is there of ours; TensorBoard's own parts stay. */
export function writeHash(state) {
  const host = hashWindow();
  const params = stateParams(state);
  saveParams(host, params);
  const kept = host.location.hash.replace(/^#/, '').split('&')
    .filter((part) => part && !decodeURIComponent(part.split('=')[0]).startsWith(HASH_PREFIX));
  if (host === window.parent && !kept.length) kept.push('op_compare');
  for (const [key, value] of Object.entries(params)) {
    kept.push(`${encodeURIComponent(HASH_PREFIX + key)}=${encodeURIComponent(value)}`);
  }
  const hash = `#${kept.join('&')}`;
  if (host.location.hash !== hash) host.history.replaceState(host.history.state, '', hash);
}

/**
 * Keep `state` in the hash while the tab lives: TensorBoard keeps this frame when the user
 * visits another of its tabs, and on coming back its hash names this tab without our keys.
 * @param {TabState} state
 */
export function keepStateInHash(state) {
  const host = hashWindow();
  const putBack = () => {
    if (showsThisTab(host) && !Object.keys(hashParams(host.location.hash)).length) writeHash(state);
  };
  host.addEventListener('hashchange', putBack);
  // The listener is TensorBoard's page's and would outlive this document: after the frame
  // is loaded again, it would put this document's last state in the hash over the new one's.
  window.addEventListener('pagehide', () => host.removeEventListener('hashchange', putBack), {once: true});
}
