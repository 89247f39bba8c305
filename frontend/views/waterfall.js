// "Where the time went": the headline's two steps split by what they were spent on, as a
// waterfall from the baseline's step to the target's. Each bar is one category's change;
// the bars add up to the wall difference the headline is the ratio of, so the headline and
// the op table meet here. The route computes every figure; this draws them as they are.

import {loadPlotly} from '../api.js';
import {STEP_PARTS} from '../contract.js';
import {h, setText} from '../dom.js';
import {formatTime, plotlyText} from '../format.js';
import {themedLayout} from '../theme.js';

/** @typedef {import('../contract.js').CompareSummary} CompareSummary */
/** @typedef {import('../contract.js').StepBreakdown} StepBreakdown */

const SAVED = '#2e7d32';
const ADDED = '#c62828';
const TOTAL = '#757575';

/** A change as the waterfall labels it: `−44.2 ms`, `+4.00 ms`. */
export function changeText(us) {
  if (us === null || us === undefined) return '–';
  if (us === 0) return '0';
  return `${us < 0 ? '−' : '+'}${formatTime(Math.abs(us))}`;
}

/**
 * The waterfall's bars: the baseline's step, each host category's change, the target's step.
 * @param {StepBreakdown} breakdown
 * @returns {{labels: string[], measures: string[], values: number[], texts: string[]}}
 */
export function waterfallBars(breakdown) {
  const host = breakdown.parts.filter((part) => part.side === 'host');
  return {
    labels: ['baseline step', ...host.map((part) => part.label), 'target step'],
    measures: ['absolute', ...host.map(() => 'relative'), 'total'],
    values: [breakdown.baseline_wall_us, ...host.map((part) => part.change_us), breakdown.target_wall_us],
    texts: [formatTime(breakdown.baseline_wall_us), ...host.map((part) => changeText(part.change_us)),
            formatTime(breakdown.target_wall_us)],
  };
}

function figure(breakdown) {
  const bars = waterfallBars(breakdown);
  const trace = {
    type: 'waterfall', orientation: 'v',
    x: bars.labels.map(plotlyText), y: bars.values.map((us) => us / 1000), measure: bars.measures,
    text: bars.texts, textposition: 'outside', cliponaxis: false,
    hovertemplate: '%{x}: %{text}<extra></extra>',
    decreasing: {marker: {color: SAVED}}, increasing: {marker: {color: ADDED}}, totals: {marker: {color: TOTAL}},
    connector: {line: {color: '#bdbdbd', width: 1}},
  };
  const layout = {
    margin: {l: 56, r: 16, t: 24, b: 8}, height: 340, showlegend: false,
    yaxis: {title: {text: 'ms per step', font: {size: 11}}, gridcolor: '#eee', rangemode: 'tozero'},
    xaxis: {automargin: true, tickfont: {size: 11}},
    font: {family: 'Roboto, sans-serif', size: 12, color: '#424242'},
  };
  return {data: [trace], layout: themedLayout(layout)};
}

/**
 * The device's time in the two steps, as a small grid below the chart: a grid, not a
 * table, since the op table is the page's one table (its styles and tests look for it).
 */
function deviceTable(breakdown) {
  const parts = breakdown.parts.filter((part) => part.side === 'device');
  if (!parts.length) return null;
  const cells = (texts, attributes = {}) => h('div', {class: 'oc-breakdown-row', role: 'row', ...attributes},
    ...texts.map((text, i) => h('span', {class: i ? 'oc-num' : '', role: i ? 'cell' : 'rowheader'}, text)));
  // a side that ran on no device (a CPU run) has null device times: formatTime's '–'
  return h('div', {class: 'oc-breakdown-device', id: 'oc-breakdown-device', role: 'table'},
    cells(['On the device, in the same steps', 'baseline', 'target', 'change'], {class: 'oc-breakdown-row oc-breakdown-head'}),
    ...parts.map((part) => cells([part.label, formatTime(part.baseline_us), formatTime(part.target_us),
                                  changeText(part.change_us)], {'data-category': part.category})));
}

/**
 * Each pooled run's own median steady step, split, where a side pools repeats: one run
 * whose step went elsewhere (a hiccup: "untracked" grown) shows beside the pooled bars.
 * Columns are the parts any run has, by their keys (their labels in each header's title).
 */
function runsGrid(breakdown) {
  if (!breakdown.runs.length) return null;
  const keys = Object.keys(STEP_PARTS).filter((key) => breakdown.runs.some((run) => key in run.host));
  const columns = `minmax(180px, 1fr) 70px 90px ${keys.map(() => '90px').join(' ')}`;
  const row = (texts, attributes = {}, titles = []) => h('div', {class: 'oc-breakdown-row', role: 'row',
    style: `grid-template-columns: ${columns}`, ...attributes},
    ...texts.map((text, i) => h('span', {class: i > 1 ? 'oc-num' : '', role: i ? 'cell' : 'rowheader',
                                        title: titles[i] || null}, text)));
  return h('div', {class: 'oc-breakdown-device oc-breakdown-runs', id: 'oc-breakdown-runs', role: 'table'},
    row(['Each run\'s (or rank\'s) own median steady step', 'side', 'step', ...keys],
        {class: 'oc-breakdown-row oc-breakdown-head'}, ['', '', '', ...keys.map((key) => STEP_PARTS[key])]),
    ...breakdown.runs.map((run) => row([run.run, run.side, formatTime(run.wall_us),
      ...keys.map((key) => (key in run.host ? formatTime(run.host[key]) : '–'))], {'data-run': run.run})));
}

export class WaterfallChart {
  constructor() {
    this.chart = h('div', {class: 'oc-chart oc-waterfall', id: 'oc-waterfall'});
    this.caption = h('div', {class: 'oc-card-detail', id: 'oc-breakdown-caption'});
    this.device = h('div', {});
    this.exportLink = h('a', {class: 'oc-link oc-breakdown-export', id: 'oc-breakdown-export', download: '', href: '#'},
      'Download CSV');
    this.element = h('section', {class: 'oc-card oc-breakdown', id: 'oc-breakdown', 'aria-label': 'where the time went'},
      h('div', {class: 'oc-breakdown-title'}, h('h3', {}, 'Where the time went'), this.exportLink),
      this.caption, this.chart, this.device);
    this.summary = null;
  }

  /**
   * Draw `summary`'s breakdown, or say why it has none; a later call supersedes one drawing.
   * @param {CompareSummary} summary
   * @param {string} [csvUrl] the breakdown route's CSV of the same runs (kept from the last call)
   */
  async show(summary, csvUrl = this.csvUrl) {
    this.summary = summary;
    this.csvUrl = csvUrl;
    const breakdown = summary.breakdown;
    this.exportLink.hidden = !breakdown || !csvUrl;
    if (csvUrl) this.exportLink.href = csvUrl;
    if (!breakdown) {
      this.element.hidden = !summary.breakdown_note;
      setText(this.caption, summary.breakdown_note || '');
      this.chart.replaceChildren();
      this.device.replaceChildren();
      return;
    }
    this.element.hidden = false;
    setText(this.caption, `The median steady step of each side (${breakdown.baseline_steps} vs ` +
      `${breakdown.target_steps} steady steps), split by what it was spent on, on the thread that drives it: ` +
      'each bar is one part\'s change, and they add up to the difference of the two steps.' +
      (summary.breakdown_note ? ` ${summary.breakdown_note}` : ''));
    this.device.replaceChildren(...[deviceTable(breakdown), runsGrid(breakdown)].filter(Boolean));
    let Plotly;
    try {
      Plotly = await loadPlotly();
    } catch (error) {
      this.chart.replaceChildren(h('div', {class: 'oc-chart-empty'}, error.message));
      return;
    }
    if (summary !== this.summary) return;
    this.chart.querySelector('.oc-chart-empty')?.remove();
    const {data, layout} = figure(breakdown);
    await Plotly.react(this.chart, data, layout, {displayModeBar: false, responsive: true});
  }
}
