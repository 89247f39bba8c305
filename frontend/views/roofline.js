// The "Roofline" view: why an op sped up (issue 54). The ops of the runs the Compare page
// compares, each on its device's roofline on both sides: one log-log plot with each run's
// roof and each op's two points joined by an arrow (baseline to target), sized by the op's
// share of its run's time, and the route's rows as a table. The roofline route computes it
// all (work, rates, roofs, what the change did); this draws its document as it comes. Ops
// whose work is unknown, or whose rate passes its roof, are not plotted: the notes say
// which and why. An op on a processor whose limits are unknown (a CPU without a sidecar)
// is plotted all the same: its rate and intensity are measured, only its roof is not.

import {fetchRoofline, loadPlotly, rooflineCsvUrl} from '../api.js';
import {h, setText} from '../dom.js';
import {formatCount, formatRate, formatShare, formatSpeedup, plotlyText} from '../format.js';
import {themedLayout} from '../theme.js';
import {poolNoteSlot, showPairPage} from './latest.js';
import {SIDES, SIDE_COLOURS, SIDE_LABELS, sideSwatch} from './sides.js';
import {PageSkeleton} from './skeleton.js';
import {messageBox} from './states.js';

/** @typedef {import('../contract.js').RooflineDocument} RooflineDocument */
/** @typedef {import('../contract.js').RooflineRun} RooflineRun */
/** @typedef {import('../contract.js').RooflineRow} RooflineRow */
/** @typedef {import('../state.js').Selection} Selection */

const PLOT_HEIGHT = 480; // as .oc-roofline-plot's height in style.css
const MAX_PLOTTED = 40; // the ops with the most time: more arrows than this hide each other
const MAX_SHOWN = 2000;
const MARKER_MIN = 6;
const MARKER_MAX = 28;

/** The table's columns: [field, label, title]. */
export const ROOFLINE_TABLE = [
  ['op_name', 'Op', 'the outermost op with known work (an aten::conv2d, not the convolution it calls)'],
  ['baseline_flops_per_s', 'Baseline FLOP/s', 'achieved on the baseline'],
  ['target_flops_per_s', 'Target FLOP/s', 'achieved on the target'],
  ['baseline_intensity', 'Baseline FLOP/B', 'arithmetic intensity on the baseline'],
  ['target_intensity', 'Target FLOP/B', 'arithmetic intensity on the target'],
  ['baseline_fraction_of_roof', 'Baseline % roof', 'achieved / the roof at its intensity, baseline (its bound)'],
  ['target_fraction_of_roof', 'Target % roof', 'achieved / the roof at its intensity, target (its bound)'],
  ['speedup', 'Speedup', 'baseline time per call / target time per call'],
  ['work_ratio', 'Work ×', 'target FLOPs per call / baseline FLOPs per call: other than 1×, the speedup compares ' +
   'different work (another batch size, or a compiler that took some calls into its own kernels)'],
  ['change', 'Change', 'moved along the roof (same fraction of the roof), closed or widened the gap under it'],
];

/** Whether a row's side is on the plot: its rate and intensity known, and no suspect rate. */
export function placed(row, side) {
  return !row[`${side}_suspect`] && row[`${side}_intensity`] > 0 && row[`${side}_flops_per_s`] > 0;
}

/** The rows the plot draws: those placed on either side, the most time first (the route's order). */
export function plottedRows(rows) {
  return rows.filter((row) => SIDES.some((side) => placed(row, side))).slice(0, MAX_PLOTTED);
}

/** A marker's size for a share of its run's time (area in proportion to it). */
export function markerSize(share) {
  return share > 0 ? Math.max(MARKER_MIN, Math.min(MARKER_MAX, MARKER_MAX * Math.sqrt(share))) : MARKER_MIN;
}

/**
 * The roof traces of each run's processors that have one: min(peak, x * bandwidth) over
 * `range`, at the run's precision, and at TF32's where some of its ops were measured under
 * it (fp32 ops whose kernels ran on TF32 tensor cores: the rows' `roof_precision`).
 */
function roofTraces(document, range) {
  const traces = [];
  for (const side of SIDES) {
    // only an op timed on the device is ever under the TF32 roof
    const onTf32 = document.rows.some((row) => row[`${side}_roof_precision`] === 'tf32');
    for (const limits of document[side].limits) {
      if (!limits.peak_flops || !limits.memory_bandwidth) continue;
      const peaks = [[limits.precision, limits.peak_flops]];
      if (onTf32 && limits.processor === 'device' && limits.peak_flops_by_precision.tf32) {
        peaks.push(['tf32', limits.peak_flops_by_precision.tf32]);
      }
      for (const [precision, peak] of peaks) {
        const ridge = peak / limits.memory_bandwidth;
        const xs = [range[0], ...(ridge > range[0] && ridge < range[1] ? [ridge] : []), range[1]];
        const name = `${SIDE_LABELS[side]} roof: ${limits.device} (${precision || '?'})`;
        traces.push({type: 'scatter', mode: 'lines', name: plotlyText(name), legendgroup: `roof-${side}`,
                     x: xs, y: xs.map((x) => Math.min(peak, x * limits.memory_bandwidth)),
                     line: {color: SIDE_COLOURS[side], width: precision === limits.precision ? 2 : 1,
                            dash: side === 'baseline' ? 'dash' : 'solid'},
                     hovertemplate: `${plotlyText(name)}<br>%{y:.3s}FLOP/s at %{x:.3g} FLOP/B<extra></extra>`});
      }
    }
  }
  return traces;
}

function hoverText(row, side) {
  const bound = row[`${side}_bound`] ? ` (${row[`${side}_bound`]}-bound)` : '';
  return `${plotlyText(row.op_name)} · ${SIDE_LABELS[side]}<br>` +
    `${formatRate(row[`${side}_flops_per_s`], 'FLOP/s')} at ${Number(row[`${side}_intensity`].toPrecision(3))} FLOP/B` +
    (row[`${side}_fraction_of_roof`] === null ? '<br>no roof: its processor\'s limits are unknown' :
      `<br>${formatShare(row[`${side}_fraction_of_roof`])} of the ` +
      `${row[`${side}_roof_precision`] === 'tf32' ? 'TF32 tensor cores\' roof' : 'roof'}${bound}`) +
    (row.change ? `<br>${row.change}, ${formatSpeedup(row.speedup)}` : '');
}

/**
 * The plotly figure: both runs' roofs, each op's points (baseline and target) and an arrow
 * from one to the other where both are placed.
 * @param {RooflineDocument} document
 */
export function rooflineFigure(document) {
  const rows = plottedRows(document.rows);
  const xs = rows.flatMap((row) => SIDES.filter((side) => placed(row, side)).map((side) => row[`${side}_intensity`]));
  const range = [Math.min(0.01, ...xs) / 2, Math.max(1000, ...xs) * 2];
  const data = roofTraces(document, range);
  for (const side of SIDES) {
    const kept = rows.filter((row) => placed(row, side));
    data.push({type: 'scatter', mode: 'markers', name: `${SIDE_LABELS[side]} ops`, legendgroup: side,
               x: kept.map((row) => row[`${side}_intensity`]), y: kept.map((row) => row[`${side}_flops_per_s`]),
               customdata: kept.map((row) => row.op_name),
               text: kept.map((row) => hoverText(row, side)), hovertemplate: '%{text}<extra></extra>',
               marker: {color: SIDE_COLOURS[side], size: kept.map((row) => markerSize(row[`${side}_share`])),
                        opacity: 0.75, line: {width: 1, color: '#ffffff'}}});
  }
  const annotations = rows.filter((row) => SIDES.every((side) => placed(row, side))).map((row) => ({
    x: Math.log10(row.target_intensity), y: Math.log10(row.target_flops_per_s),
    ax: Math.log10(row.baseline_intensity), ay: Math.log10(row.baseline_flops_per_s),
    xref: 'x', yref: 'y', axref: 'x', ayref: 'y', showarrow: true, arrowhead: 2, arrowsize: 1, arrowwidth: 1,
    arrowcolor: '#9e9e9e', text: '', standoff: 4}));
  const layout = {
    height: PLOT_HEIGHT, margin: {l: 64, r: 16, t: 8, b: 48}, hovermode: 'closest', annotations,
    xaxis: {type: 'log', title: {text: 'arithmetic intensity, FLOP per byte', font: {size: 11}}},
    yaxis: {type: 'log', title: {text: 'achieved FLOP/s', font: {size: 11}}, exponentformat: 'SI'},
    legend: {orientation: 'h', x: 0, y: 1.02, yanchor: 'bottom', font: {size: 11}},
    font: {family: 'Roboto, sans-serif', size: 12},
  };
  return {data, layout};
}

/** What the caption says of the runs and the figure. */
export function captionText(document) {
  return `${document.baseline.run} → ${document.target.run}: each op's achieved FLOP/s against its arithmetic ` +
    'intensity, under each run\'s roof (dashed: the baseline\'s), an arrow from the baseline\'s point to the ' +
    'target\'s, each point sized by the op\'s share of its run\'s time; the ops with the most time first.';
}

/** A run's card line: its achieved rate and each roof. */
function runLines(run) {
  return [
    `${formatRate(run.flops_per_s, 'FLOP/s')} achieved on the ops of known work`,
    ...run.limits.map((limits) => `${limits.processor}: ${limits.device || 'limits unknown'}` +
      (limits.peak_flops ? ` · ${formatRate(limits.peak_flops, 'FLOP/s')} ${limits.precision}` : '') +
      (limits.memory_bandwidth ? ` · ${formatRate(limits.memory_bandwidth, 'B/s')}` : '')),
  ];
}

function rooflineFailed(error) {
  return messageBox({kind: 'error', title: 'The runs\' rooflines cannot be drawn', text: error.message,
                     id: 'oc-roofline-message'});
}

export class RooflineView {
  /**
   * @param {{selection: Selection, ready: () => Promise<boolean|null>, onOpenCompare: () => void}} options
   *   `selection` is the Compare page's (read each time the view is shown)
   */
  constructor({selection, ready, onOpenCompare}) {
    this.selection = selection;
    this.ready = ready;
    this.onOpenCompare = onOpenCompare;
    this.requestId = 0;
    this.loading = null;
    this.shownKey = null;
    /** @type {RooflineDocument|null} */
    this.document = null;
    this.element = h('section', {class: 'oc-roofline-view', id: 'oc-roofline'});
    this.caption = h('div', {class: 'oc-roofline-caption', id: 'oc-roofline-caption'});
    this.notes = h('div', {class: 'oc-notices', id: 'oc-roofline-notes'});
    this.cards = h('div', {class: 'oc-summary oc-roofline-cards', id: 'oc-roofline-cards'});
    this.plot = h('div', {class: 'oc-chart oc-roofline-plot', id: 'oc-roofline-plot'});
    this.count = h('span', {class: 'oc-count', id: 'oc-roofline-count'});
    this.exportLink = h('a', {class: 'oc-button', id: 'oc-roofline-export', download: '', href: '#',
                              title: 'every op row, as the route lists them'}, 'Download CSV');
    this.rows = h('tbody');
    this.table = h('table', {class: 'oc-table oc-roofline-table', id: 'oc-roofline-table'},
      h('thead', {}, h('tr', {}, ROOFLINE_TABLE.map(([name, label, title]) =>
        h('th', {scope: 'col', class: name === 'op_name' || name === 'change' ? '' : 'oc-num', title}, label)))),
      this.rows);
    this.poolSlot = poolNoteSlot();
    this.body = h('div', {class: 'oc-roofline-body'}, this.caption, this.poolSlot, this.notes, this.cards,
      h('div', {class: 'oc-card oc-chart-card oc-roofline-card'}, this.plot),
      h('div', {class: 'oc-filters oc-roofline-filters'}, h('span', {class: 'oc-spacer-flex'}), this.count,
        this.exportLink),
      h('div', {class: 'oc-table-scroll oc-roofline-scroll'}, this.table));
    this.skeleton = new PageSkeleton({body: this.body, exportLink: this.exportLink, loadingText: 'Reading both runs…',
                                      frameClass: 'oc-roofline-frame'});
    this.element.replaceChildren(this.skeleton.message, this.skeleton.element);
  }

  /** Each time the view is opened: the rooflines of the Compare page's runs, unless on screen. */
  async show() {
    return showPairPage(this, {
      id: 'oc-roofline', fetch: fetchRoofline, failed: rooflineFailed, clear: () => { this.document = null; },
      text: 'This page puts the ops of the runs chosen on the Compare runs page on their rooflines.'});
  }


  /** @param {RooflineDocument} document */
  async draw(document, params, id) {
    this.document = document;
    this.exportLink.href = rooflineCsvUrl(params);
    setText(this.caption, captionText(document));
    this.notes.replaceChildren(...document.notes.map((note) =>
      h('div', {class: 'oc-panel oc-panel-note oc-roofline-note'}, note)));
    this.cards.replaceChildren(...SIDES.map((side) => h('div', {class: 'oc-card', 'data-side': side},
      h('div', {class: 'oc-card-title'}, sideSwatch(side), `${SIDE_LABELS[side]} · roofs`),
      h('div', {class: 'oc-run-name', title: document[side].run}, document[side].run),
      runLines(document[side]).map((line) => h('div', {class: 'oc-card-detail'}, line)))));
    this.drawRows();
    await this.drawPlot(id);
  }

  async drawPlot(id = this.requestId) {
    if (!plottedRows(this.document.rows).length) {
      this.plot.replaceChildren(h('div', {class: 'oc-chart-empty', id: 'oc-roofline-no-plot'},
        'No op of these runs can be placed: the work of each is unknown (the notes say which, and how to record ' +
        'what it needs).'));
      return;
    }
    let Plotly;
    try {
      Plotly = await loadPlotly();
    } catch (error) {
      this.plot.replaceChildren(h('div', {class: 'oc-chart-empty'}, error.message));
      return;
    }
    if (id !== this.requestId || !this.document) return;
    const {data, layout} = rooflineFigure(this.document);
    await Plotly.react(this.plot, data, themedLayout(layout), {displaylogo: false, responsive: true});
  }

  /** Draw the plot again (in the current theme), if it is on screen. */
  redraw() {
    if (this.document && !this.element.hidden && !this.body.hidden) this.drawPlot();
  }

  drawRows() {
    const all = this.document.rows;
    this.count.textContent = `${formatCount(all.length)} ${all.length === 1 ? 'op' : 'ops'}`;
    if (!all.length) {
      this.rows.replaceChildren(h('tr', {}, h('td', {class: 'oc-no-rows', colspan: ROOFLINE_TABLE.length},
        'No op of these runs has work this version can tell')));
      return;
    }
    this.rows.replaceChildren(...all.slice(0, MAX_SHOWN).map((row) => this.row(row)));
  }

  /** @param {RooflineRow} row */
  row(row) {
    const cell = (name, text, title = null) => h('td', {class: 'oc-num', 'data-roofline-column': name,
                                                        ...(title ? {title} : {})}, text);
    const fraction = (side) => {
      const suspect = row[`${side}_suspect`];
      if (suspect) return cell(`${side}_fraction_of_roof`, 'suspect', suspect);
      const bound = row[`${side}_bound`];
      // as the CLI marks them: an fp32 op measured under its TF32 tensor cores' roof
      const unit = row[`${side}_roof_precision`] === 'tf32' ? ' tf32' : '';
      return cell(`${side}_fraction_of_roof`,
                  formatShare(row[`${side}_fraction_of_roof`]) + (bound ? ` ${bound}` : '') + unit,
                  row[`${side}_source`]);
    };
    const intensity = (side) => {
      const value = row[`${side}_intensity`];
      return cell(`${side}_intensity`, value === null ? '–' : String(Number(value.toPrecision(3))));
    };
    return h('tr', {class: 'oc-row oc-roofline-row', 'data-key': row.op_name},
      h('td', {class: 'oc-text', 'data-roofline-column': 'op_name', title: row.op_name}, row.op_name),
      cell('baseline_flops_per_s', formatRate(row.baseline_flops_per_s, 'FLOP/s')),
      cell('target_flops_per_s', formatRate(row.target_flops_per_s, 'FLOP/s')),
      intensity('baseline'), intensity('target'), fraction('baseline'), fraction('target'),
      cell('speedup', formatSpeedup(row.speedup)), cell('work_ratio', formatSpeedup(row.work_ratio)),
      h('td', {'data-roofline-column': 'change'}, row.change || '–'));
  }
}

