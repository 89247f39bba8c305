// The "Trend" view: a model's top ops and its whole step across many runs, in a chosen
// order (recording time, label, run name, repeat, a sidecar field such as a framework
// version, or a run dimension such as the precision: a sweep over it). The trend route
// pools the runs that share a value of the order into one point (geometric mean with a
// 95% interval); this draws its document as it is.

import {fetchTrend, loadPlotly, trendCsvUrl} from '../api.js';
import {h, setText} from '../dom.js';
import {GROUP_BY_LABELS, formatTime, plotlyText, shortenNames} from '../format.js';
import {DEFAULT_TREND_TOP, MAX_SWEEP_TOP, SIDECAR_ORDER, TREND_ORDERS, sweepTop, trendParams} from '../state.js';
import {themedLayout} from '../theme.js';
import {roundLogTicks} from '../ticks.js';
import {showInstead, showLatest} from './latest.js';
import {PageSkeleton} from './skeleton.js';
import {messageBox} from './states.js';

/** @typedef {import('../contract.js').TrendDocument} TrendDocument */
/** @typedef {import('../contract.js').TrendRow} TrendRow */
/** @typedef {import('../contract.js').RunsDocument} RunsDocument */
/** @typedef {import('../state.js').TrendState} TrendState */
/** @typedef {import('../api.js').ApiError} ApiError */

export const WHOLE_STEP = '(whole step)'; // the trend's key after the ops (analysis/confidence.py)
export const STEP_PART = '(step) '; // the keys of the step's parts, after it (analysis/breakdown.py)
// What the whole step's figure is (TrendDocument.whole_step_basis), as its plot's title says it.
const STEP_TITLES = {
  'step wall time': 'median steady step wall time (step markers)',
  'op time per step': 'all op time of a profiled step (no step markers)',
  'mixed': 'step wall time where the runs have step markers, else all op time of a step',
};
const ORDER_LABELS = {recorded: 'Recorded time', label: 'Label', run: 'Run name', repeat: 'Repeat', device: 'Device',
                      batch_size: 'Batch size', precision: 'Precision', compiler: 'Compiler'};
const SIDECAR = 'sidecar';
const SIDECAR_EXAMPLE = 'versions.torch';
// The colours of the batch sweep's figures (service/figures.py PALETTE): one op, one colour.
const PALETTE = ['#1976d2', '#f57c00', '#388e3c', '#d32f2f', '#7b1fa2', '#0097a7', '#5d4037', '#c2185b', '#455a64',
                 '#afb42b', '#512da8', '#00796b'];
const STEP_COLOUR = '#616161';
const LABEL_LENGTH = 26; // a point's value under the axis (an ISO recording time fits)
const LEGEND_LENGTH = 36; // as the sweep's legends shorten op names
const LEGEND_WIDTH = 300; // px right of both plots: a legend line of LEGEND_LENGTH characters
const OPS_PLOT_HEIGHT = 380;
const STEP_PLOT_HEIGHT = 200;
const KNOWN_SHOWN = 20; // of a 404's known run names
const RUNS_IN_HOVER = 4;

/**
 * The runs of the baseline's model, as the runs field's default: the comparison's model
 * over time. Null when the listing does not know the baseline.
 * @param {RunsDocument|null} listing
 * @param {string|null} baseline
 * @returns {{model: string, runs: string[]}|null}
 */
export function modelRuns(listing, baseline) {
  const record = listing && listing.runs.find((run) => run.run === baseline);
  if (!record) return null;
  return {model: record.model, runs: listing.runs.filter((run) => run.model === record.model).map((run) => run.run)};
}

/** "3 runs" */
function runsWord(count) {
  return `${count} ${count === 1 ? 'run' : 'runs'}`;
}

/**
 * Each point's label under the axis: its value (shortened; the hover has it whole) and
 * how many runs it pools.
 * @param {TrendDocument} trend
 * @returns {string[]} plotly text
 */
export function pointLabels(trend) {
  const values = shortenNames(trend.points.map((point) => point.value), LABEL_LENGTH);
  return trend.points.map((point, i) => `${plotlyText(values[i])}<br>${runsWord(point.runs.length)}`);
}

/** A time on the axis: "2 ms", "500 µs" (formatTime without trailing zeros). */
function tickTime(us) {
  return formatTime(us).replace(/\.0+ /, ' ');
}

/**
 * Round ticks, as times, for a log axis from `low` to `high` µs.
 * @returns {{tickvals: number[], ticktext: string[]}|null}
 */
export function timeTicks(low, high) {
  return roundLogTicks(low, high, tickTime);
}

/** "95% interval 171 µs – 997 µs", or why there is none. */
function intervalText(row) {
  if (row.low_us === null || row.high_us === null) return row.runs > 1 ? 'no interval' : 'one run: no interval';
  return `95% interval ${formatTime(row.low_us)} – ${formatTime(row.high_us)}`;
}

/** Which runs of the point the row pools, as the hover says it. */
function runsText(row, point) {
  const names = point.runs.slice(0, RUNS_IN_HOVER).join(', ') +
    (point.runs.length > RUNS_IN_HOVER ? `, +${point.runs.length - RUNS_IN_HOVER} more` : '');
  const pooled = row.runs === point.runs.length ? runsWord(row.runs) : `${row.runs} of ${point.runs.length} runs`;
  return `${pooled} (${names})`;
}

/**
 * One line over the points per key, with a bar over each point's 95% interval where it
 * has one; a point without the op is a gap.
 * @param {TrendDocument} trend
 * @param {string[]} keys
 * @param {string[]} colours
 */
function traces(trend, keys, colours) {
  const byKey = new Map(keys.map((key) => [key, trend.points.map(() => null)]));
  for (const row of trend.rows) if (byKey.has(row.key)) byKey.get(row.key)[row.point] = row;
  const names = shortenNames(keys, LEGEND_LENGTH);
  return keys.map((key, k) => {
    const rows = byKey.get(key);
    const present = (row) => row && row.mean_us !== null && row.mean_us > 0;
    const hasInterval = rows.some((row) => present(row) && row.low_us !== null && row.high_us !== null);
    return {
      type: 'scatter', mode: 'lines+markers', name: plotlyText(names[k]), meta: plotlyText(key),
      x: trend.points.map((point, i) => i),
      y: rows.map((row) => (present(row) ? row.mean_us : null)),
      line: {color: colours[k], width: 2}, marker: {color: colours[k], size: 7},
      customdata: rows.map((row, i) => (present(row) ? [plotlyText(trend.points[i].value),
                                                         plotlyText(runsText(row, trend.points[i])),
                                                         formatTime(row.mean_us), intervalText(row)] : null)),
      hovertemplate: '%{meta}<br>%{customdata[0]}: %{customdata[1]}<br>mean %{customdata[2]} per execution · ' +
        '%{customdata[3]}<extra></extra>',
      ...(hasInterval ? {error_y: {
        type: 'data', symmetric: false, thickness: 1.5, width: 3, color: colours[k],
        array: rows.map((row) => (present(row) && row.high_us !== null ? row.high_us - row.mean_us : null)),
        arrayminus: rows.map((row) => (present(row) && row.low_us !== null ? row.mean_us - row.low_us : null)),
      }} : {}),
    };
  });
}

/**
 * The time axis of `data`: log, from the lowest interval end to the highest, with ticks
 * as times.
 */
function timeAxis(data, title) {
  const values = [];
  for (const trace of data) {
    trace.y.forEach((y, i) => {
      if (y === null) return;
      values.push(y);
      if (trace.error_y) {
        values.push(y - (trace.error_y.arrayminus[i] || 0), y + (trace.error_y.array[i] || 0));
      }
    });
  }
  const positive = values.filter((value) => value > 0);
  const axis = {type: 'log', title: {text: title, font: {size: 11}, standoff: 8}, automargin: true, zeroline: false,
                minor: {showgrid: true}};
  if (!positive.length) return axis;
  const low = Math.min(...positive);
  const high = Math.max(...positive);
  const pad = Math.max(0.05, (Math.log10(high) - Math.log10(low)) * 0.06);
  return {...axis, range: [Math.log10(low) - pad, Math.log10(high) + pad],
          ...(timeTicks(low / 10 ** pad, high * 10 ** pad) || {})};
}

/**
 * The two figures of a trend: the top ops, and the whole step (its own figure: it is an
 * order of magnitude above any op, and would squeeze them together).
 * @param {TrendDocument} trend
 * @returns {{ops: {data: Object[], layout: Object}|null, step: {data: Object[], layout: Object}|null}}
 */
export function trendFigures(trend) {
  const labels = pointLabels(trend);
  // plotly text: a sidecar field's name in the title comes from the link
  const xaxis = {type: 'category', tickmode: 'array', tickvals: trend.points.map((point, i) => i), ticktext: labels,
                 range: [-0.5, trend.points.length - 0.5],
                 title: {text: plotlyText(orderTitle(trend.order_by)), font: {size: 11}}, tickfont: {size: 11}};
  const common = {font: {family: 'Roboto, sans-serif', size: 12}, hovermode: 'closest', xaxis};
  const opKeys = trend.keys.filter((key) => key !== WHOLE_STEP && !key.startsWith(STEP_PART));
  const partKeys = trend.keys.filter((key) => key.startsWith(STEP_PART));
  let ops = null;
  if (opKeys.length) {
    const data = traces(trend, opKeys, opKeys.map((key, i) => PALETTE[i % PALETTE.length]));
    // The legend beside the plot, a line per op (plotly scrolls it when the ops outgrow it).
    ops = {data, layout: {
      ...common, height: 36 + OPS_PLOT_HEIGHT + 70, margin: {l: 72, r: LEGEND_WIDTH, t: 36, b: 70},
      title: {text: `Mean time per execution of the top ${opKeys.length} ops`, font: {size: 14}, x: 0, xanchor: 'left'},
      yaxis: timeAxis(data, 'mean time per execution'),
      showlegend: true,
      legend: {orientation: 'v', x: 1.01, xanchor: 'left', y: 1, yanchor: 'top',
               font: {size: 11, family: 'Roboto Mono, monospace'}},
    }};
  }
  let step = null;
  if (trend.keys.includes(WHOLE_STEP)) {
    // the step's parts beside it, each a line (a click on the legend shows one alone)
    const data = traces(trend, [WHOLE_STEP, ...partKeys],
                        [STEP_COLOUR, ...partKeys.map((key, i) => PALETTE[(i + 3) % PALETTE.length])]);
    step = {data, layout: {
      // As wide a margin as the ops' legend: the two plots' points stand one above the other.
      ...common, height: 36 + STEP_PLOT_HEIGHT + 70, margin: {l: 72, r: LEGEND_WIDTH, t: 36, b: 70},
      title: {text: `Whole step: ${STEP_TITLES[trend.whole_step_basis]}` +
        (partKeys.length ? ', and what it was spent on' : ''), font: {size: 14}, x: 0, xanchor: 'left'},
      yaxis: timeAxis(data, 'time per step'), showlegend: partKeys.length > 0,
      legend: {orientation: 'v', x: 1.01, xanchor: 'left', y: 1, yanchor: 'top', font: {size: 11}},
    }};
  }
  return {ops, step};
}

/** The order in words: "recorded time", "sidecar field versions.torch". */
function orderTitle(orderBy) {
  if (orderBy.startsWith(SIDECAR_ORDER)) return `sidecar field ${orderBy.slice(SIDECAR_ORDER.length)}`;
  return (ORDER_LABELS[orderBy] || orderBy).toLowerCase();
}

/** @param {ApiError} error */
function trendFailed(error) {
  const known = error.known && error.known.length ? error.known : null;
  const hint = known ? `Known runs: ${known.slice(0, KNOWN_SHOWN).join(', ')}` +
    (known.length > KNOWN_SHOWN ? `, and ${known.length - KNOWN_SHOWN} more` : '') : null;
  const title = error.status === 404 ? 'No such run' : error.status === 422 ? 'A profile cannot be read' :
    'The trend failed';
  return messageBox({kind: 'error', title, text: error.message, hint, id: 'oc-trend-message'});
}

export class TrendView {
  /**
   * @param {{state: TrendState, onStateChange: () => void,
   *          defaultRuns: () => Promise<{model: string, runs: string[]}|null>}} options `state`
   *   is changed in place, then `onStateChange` runs; `defaultRuns` gives the runs of the
   *   comparison's model, once the runs are listed
   */
  constructor({state, onStateChange, defaultRuns}) {
    this.state = state;
    this.onStateChange = onStateChange;
    this.defaultRuns = defaultRuns;
    this.requestId = 0;
    this.loading = null; // the trend being fetched and drawn, with its parameters
    this.shownKey = null; // the parameters of the trend on screen
    /** @type {TrendDocument|null} */
    this.document = null;
    this.element = h('section', {class: 'oc-trend', id: 'oc-trend'});
    this.build();
  }

  build() {
    this.runsInput = h('input', {class: 'oc-input oc-trend-runs', id: 'oc-trend-runs', type: 'text',
                                 spellcheck: 'false', 'aria-label': 'runs',
                                 placeholder: 'run names or patterns, comma-separated: cnn*, mnist_cpu_bs16',
                                 onchange: () => this.change({runs: this.runsInput.value.trim() || null})});
    this.runsHint = h('span', {class: 'oc-trend-hint', id: 'oc-trend-runs-hint'});
    this.orderSelect = h('select', {class: 'oc-select', id: 'oc-trend-order', 'aria-label': 'order the runs by',
                                    onchange: () => this.chooseOrder()},
      TREND_ORDERS.map((order) => h('option', {value: order}, ORDER_LABELS[order])),
      h('option', {value: SIDECAR}, 'Sidecar field…'));
    this.fieldInput = h('input', {class: 'oc-input oc-trend-field', id: 'oc-trend-field', type: 'text',
                                  spellcheck: 'false', placeholder: SIDECAR_EXAMPLE, 'aria-label': 'sidecar field',
                                  title: 'a field of the runs\' opcompare.json, dotted for nested ones (versions.torch)',
                                  onchange: () => this.chooseOrder()});
    this.groupSelect = h('select', {class: 'oc-select', id: 'oc-trend-group', 'aria-label': 'group ops by',
                                    onchange: () => this.change({group_by: this.groupSelect.value})},
      Object.entries(GROUP_BY_LABELS).map(([value, label]) => h('option', {value}, label)));
    this.topInput = h('input', {class: 'oc-input oc-short', id: 'oc-trend-top', type: 'number', min: 1,
                                max: MAX_SWEEP_TOP, 'aria-label': 'ops to plot',
                                onchange: () => this.change({top: sweepTop(this.topInput.value) || DEFAULT_TREND_TOP})});
    this.exportLink = h('a', {class: 'oc-button', id: 'oc-trend-export', download: '', href: '#'}, 'Export CSV');
    this.showState();
    this.warnings = h('div', {class: 'oc-notices'});
    this.plots = {ops: h('div', {class: 'oc-trend-plot', id: 'oc-trend-ops'}),
                  step: h('div', {class: 'oc-trend-plot oc-trend-step-plot', id: 'oc-trend-step'})};
    this.pointsList = h('div', {class: 'oc-card oc-trend-points', id: 'oc-trend-points'});
    this.body = h('div', {class: 'oc-body'}, this.warnings,
      h('div', {class: 'oc-trend-plots'}, Object.values(this.plots).map((plot) => h('div', {class: 'oc-card'}, plot))),
      this.pointsList);
    this.skeleton = new PageSkeleton({body: this.body, exportLink: this.exportLink,
                                      loadingText: 'Reading the runs…'});
    this.element.replaceChildren(
      h('section', {class: 'oc-chooser'},
        h('label', {class: 'oc-field oc-trend-runs-field'}, h('span', {class: 'oc-label'}, 'Runs'), this.runsInput,
          this.runsHint),
        h('div', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Order by'),
          h('div', {class: 'oc-inline'}, this.orderSelect, this.fieldInput)),
        h('label', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Group'), this.groupSelect),
        h('label', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Ops to plot'), this.topInput),
        h('span', {class: 'oc-spacer-flex'}), this.exportLink),
      this.skeleton.message,
      this.skeleton.element);
  }

  /** The controls as the state says (a link, or the user's last change). */
  showState() {
    const sidecar = this.state.order_by.startsWith(SIDECAR_ORDER);
    this.orderSelect.value = sidecar ? SIDECAR : this.state.order_by;
    if (sidecar) this.fieldInput.value = this.state.order_by.slice(SIDECAR_ORDER.length);
    this.fieldInput.hidden = !sidecar;
    this.groupSelect.value = this.state.group_by;
    this.topInput.value = this.state.top;
  }

  /** The order chosen; a sidecar field applies once it is typed. */
  chooseOrder() {
    const sidecar = this.orderSelect.value === SIDECAR;
    this.fieldInput.hidden = !sidecar;
    if (!sidecar) {
      this.change({order_by: this.orderSelect.value});
      return;
    }
    const field = this.fieldInput.value.trim();
    this.fieldInput.classList.toggle('oc-invalid', !field);
    if (field) this.change({order_by: `${SIDECAR_ORDER}${field}`});
    else this.fieldInput.focus();
  }

  change(changes) {
    Object.assign(this.state, changes);
    this.onStateChange();
    this.show();
  }

  /** The runs to ask for: as typed, else the comparison model's (the field shows them). */
  async runs() {
    if (this.state.runs) {
      this.runsInput.value = this.state.runs;
      this.runsHint.textContent = '';
      return this.state.runs;
    }
    const runs = await this.defaultRuns();
    if (this.state.runs) return this.state.runs; // typed meanwhile
    this.runsInput.value = runs ? runs.runs.join(',') : '';
    setText(this.runsHint, runs ? `the runs of model ${runs.model}, the baseline's` : '');
    return runs ? this.runsInput.value : null;
  }

  /** Each time the view is opened or changed: the trend of the runs, unless it is on screen. */
  async show() {
    const runs = await this.runs();
    if (!runs) {
      showInstead(this, messageBox({kind: 'note', title: 'Which runs?', id: 'oc-trend-message',
        text: 'Type the runs to follow, comma-separated: names, or shell patterns such as cnn* ' +
          '(every run of a model over time, or across framework versions).'}));
      return;
    }
    return showLatest(this, trendParams(this.state, runs), {
      fetch: fetchTrend,
      failed: trendFailed,
      draw: (document, params, id) => this.draw(document, params, id),
    });
  }

  async draw(document, params, id) {
    this.document = document;
    this.exportLink.href = trendCsvUrl(params);
    this.warnings.replaceChildren(...document.warnings.map((warning) =>
      h('div', {class: 'oc-panel oc-panel-warning oc-trend-warning'}, warning)));
    this.pointsList.replaceChildren(h('div', {class: 'oc-card-title'},
      `${document.points.length} ${document.points.length === 1 ? 'point' : 'points'}, by ${orderTitle(document.order_by)}`),
      ...(document.order_note ? [h('div', {class: 'oc-card-detail', id: 'oc-trend-order-note'}, document.order_note)] : []),
      h('ol', {class: 'oc-trend-point-list'}, document.points.map((point) => h('li', {},
        h('span', {class: 'oc-trend-value'}, point.value), ` · ${runsWord(point.runs.length)}: `,
        h('span', {class: 'oc-card-detail'}, point.runs.join(', '))))));
    await this.drawPlots(id);
  }

  async drawPlots(id = this.requestId) {
    let Plotly;
    try {
      Plotly = await loadPlotly();
    } catch (error) {
      this.plots.ops.replaceChildren(h('div', {class: 'oc-chart-empty'}, error.message));
      return;
    }
    if (id !== this.requestId || !this.document) return;
    const figures = trendFigures(this.document);
    for (const [name, element] of Object.entries(this.plots)) {
      const figure = figures[name];
      element.parentElement.hidden = !figure;
      if (figure) {
        await Plotly.react(element, figure.data, themedLayout(figure.layout), {displaylogo: false, responsive: true});
      } else {
        Plotly.purge(element);
      }
    }
  }

  /** Draw the plots again (in the current theme), if they are on screen. */
  redraw() {
    if (this.document && !this.element.hidden && !this.body.hidden) this.drawPlots();
  }
}
