// The plugin's routes. URLs are relative: the tab's module is served from
// /data/plugin/op_compare/, and so are the routes and the plotly.js bundle.

import {h} from './dom.js';

/** @typedef {import('./contract.js').RunsDocument} RunsDocument */
/** @typedef {import('./contract.js').CompareDocument} CompareDocument */
/** @typedef {import('./contract.js').SweepsDocument} SweepsDocument */
/** @typedef {import('./contract.js').SweepDocument} SweepDocument */
/** @typedef {import('./contract.js').CheckDocument} CheckDocument */
/** @typedef {import('./contract.js').TrendDocument} TrendDocument */
/** @typedef {import('./contract.js').MatrixDocument} MatrixDocument */
/** @typedef {import('./contract.js').ModulesDocument} ModulesDocument */
/** @typedef {import('./contract.js').MemoryDocument} MemoryDocument */
/** @typedef {import('./contract.js').RooflineDocument} RooflineDocument */
/** @typedef {import('./contract.js').LayersDocument} LayersDocument */
/** @typedef {import('./contract.js').ReadsDocument} ReadsDocument */

/**
 * A query string; an array value becomes the parameter repeated, once per item (the
 * compare route's `key`: op names may hold commas, so never a comma list).
 * @param {Object<string, string|string[]>} params
 */
export function queryString(params) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const item of Array.isArray(value) ? value : [value]) query.append(name, item);
  }
  return query.toString();
}

/**
 * What every failed request rejects with: the server's own JSON error where it sent one
 * (with its extra fields), else a message saying what went wrong on the way.
 * @typedef {Object} ApiError
 * @property {number} status HTTP status; 0 when TensorBoard did not answer
 * @property {string} message
 */

async function fetchJson(url) {
  let response;
  try {
    response = await fetch(url, {headers: {Accept: 'application/json'}});
  } catch (error) {
    throw {status: 0, message: `TensorBoard did not answer (${error.message}); is it still running?`};
  }
  let body = null;
  try {
    body = await response.json();
  } catch (error) {
    throw {status: response.status, message: `unexpected answer from TensorBoard (HTTP ${response.status})`};
  }
  if (!response.ok) throw body.error || {status: response.status, message: `HTTP ${response.status}`};
  return body;
}

/**
 * The server's cold reads that have taken a while: what a spinner waits for.
 * @returns {Promise<ReadsDocument>}
 */
export function fetchReads() {
  return fetchJson('reads');
}

/**
 * The runs, pairs and unreadable runs. Without `load`, no trace is read: instant even
 * for a big logdir, with the facts of runs never read taken from sidecars and names.
 * @param {{load: boolean}} options
 * @returns {Promise<RunsDocument>}
 */
export function fetchRuns({load}) {
  return fetchJson(load ? 'runs' : 'runs?load=0');
}

/**
 * @param {Object<string, string|string[]>} params runs, grouping and view (state.js; `key` repeated)
 * @returns {Promise<CompareDocument>}
 */
export function fetchComparison(params) {
  return fetchJson(`compare?${queryString(params)}`);
}

/** @param {Object<string, string>} params as for fetchComparison */
export function compareCsvUrl(params) {
  return `compare.csv?${queryString(params)}`;
}

/** @param {Object<string, string>} params the runs, as for fetchComparison: where their time went, as CSV */
export function breakdownCsvUrl(params) {
  return `breakdown.csv?${queryString(params)}`;
}

/** @returns {Promise<SweepsDocument>} */
export function fetchSweeps() {
  return fetchJson('sweeps');
}

/**
 * @param {Object<string, string>} params model, top and group_by (state.js)
 * @returns {Promise<SweepDocument>}
 */
export function fetchSweep(params) {
  return fetchJson(`sweep?${queryString(params)}`);
}

/** @param {Object<string, string>} params as for fetchSweep, and the fits table's sort, order and op_contains */
export function sweepCsvUrl(params) {
  return `sweep.csv?${queryString(params)}`;
}

/**
 * The confidence check of two groups of runs; rejects with the server's 400 when a side
 * has a single run (its message says how to record repeats).
 * @param {Object<string, string>} params baseline, target, repeats and group_by (state.js)
 * @returns {Promise<CheckDocument>}
 */
export function fetchCheck(params) {
  return fetchJson(`check?${queryString(params)}`);
}

/**
 * A model's top ops across many runs, in a chosen order; rejects with the server's 400
 * (a bad order or top) or 404 (an unknown run, with `known`).
 * @param {Object<string, string>} params runs, order_by, top and group_by (state.js trendParams)
 * @returns {Promise<TrendDocument>}
 */
export function fetchTrend(params) {
  return fetchJson(`trend?${queryString(params)}`);
}

/** @param {Object<string, string>} params as for fetchTrend */
export function trendCsvUrl(params) {
  return `trend.csv?${queryString(params)}`;
}

/**
 * Step latency, throughput and speedups of every model and batch size on every device,
 * precision and compiler; rejects with the server's 400 (a reference that is not
 * DEVICE/precision/compiler, a bad warm-up).
 * @param {Object<string, string>} params reference and warmup (state.js matrixParams)
 * @returns {Promise<MatrixDocument>}
 */
export function fetchMatrix(params) {
  return fetchJson(`matrix?${queryString(params)}`);
}

/** @param {Object<string, string>} params as for fetchMatrix */
export function matrixCsvUrl(params) {
  return `matrix.csv?${queryString(params)}`;
}

/**
 * Two runs' module trees side by side; rejects with the server's 404 (an unknown run) or
 * 422 (an unreadable profile).
 * @param {Object<string, string>} params baseline and target (state.js pairParams)
 * @returns {Promise<ModulesDocument>}
 */
export function fetchModules(params) {
  return fetchJson(`modules?${queryString(params)}`);
}

/** @param {Object<string, string>} params as for fetchModules */
export function modulesCsvUrl(params) {
  return `modules.csv?${queryString(params)}`;
}

/**
 * Two runs' application, framework, runtime and device time, and the application's and
 * runtime's rows; rejects with the server's 404 (an unknown run or session) or 422 (an
 * unreadable profile).
 * @param {Object<string, string>} params baseline, target and their sessions (state.js pairParams)
 * @returns {Promise<LayersDocument>}
 */
export function fetchLayers(params) {
  return fetchJson(`layers?${queryString(params)}`);
}

/** @param {Object<string, string>} params as for fetchLayers */
export function layersCsvUrl(params) {
  return `layers.csv?${queryString(params)}`;
}

/**
 * Two runs' memory: peaks per device, memory over time, each op's allocations; rejects
 * with the server's 404 (an unknown run or session) or 422 (an unreadable profile).
 * @param {Object<string, string>} params baseline, target and their sessions (state.js pairParams)
 * @returns {Promise<MemoryDocument>}
 */
export function fetchMemory(params) {
  return fetchJson(`memory?${queryString(params)}`);
}

/** @param {Object<string, string>} params as for fetchMemory */
export function memoryCsvUrl(params) {
  return `memory.csv?${queryString(params)}`;
}

/**
 * Two runs' ops on their devices' rooflines: each op's work, achieved rate and roof on
 * both sides; rejects as fetchMemory does.
 * @param {Object<string, string>} params baseline, target and their sessions (state.js pairParams)
 * @returns {Promise<RooflineDocument>}
 */
export function fetchRoofline(params) {
  return fetchJson(`roofline?${queryString(params)}`);
}

/** @param {Object<string, string>} params as for fetchRoofline */
export function rooflineCsvUrl(params) {
  return `roofline.csv?${queryString(params)}`;
}

let plotlyPromise = null;

/**
 * plotly.min.js downloaded into the browser's cache, not run: `loadPlotly` then runs it
 * without waiting on the network. Running it is what is costly (parsing 4.8 MB): on a
 * machine whose cores the server reads with, that waits for the first screen's numbers.
 */
export function prefetchPlotly() {
  if (!plotlyPromise) fetch('plotly.min.js').catch(() => {}); // a failure shows when a chart loads it
}

/** plotly.js, from the bundle the plugin serves (no CDN: works air-gapped), loaded once. */
export function loadPlotly() {
  if (!plotlyPromise) {
    plotlyPromise = new Promise((resolve, reject) => {
      const script = h('script', {src: 'plotly.min.js'});
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => reject(new Error('plotly.min.js could not be loaded'));
      document.head.append(script);
    });
  }
  return plotlyPromise;
}
