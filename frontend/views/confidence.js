// The "Confidence" card and its forest plot, below the summary cards: the check route's
// answer for the runs compared, each pooled with its repeats. What is significant, the
// intervals and the counts are the server's; this only draws them. The op table shows
// the same verdicts beside its speedups (views/table.js).

import {fetchCheck, loadPlotly} from '../api.js';
import {h, replaceContent} from '../dom.js';
import {formatInterval, formatLevel, formatSpeedup, plotlyText, shortenNames} from '../format.js';
import {themedLayout} from '../theme.js';
import {roundLogTicks} from '../ticks.js';
import {messageBox} from './states.js';

/** @typedef {import('../contract.js').CheckDocument} CheckDocument */
/** @typedef {import('../contract.js').CheckRow} CheckRow */
/** @typedef {import('../api.js').ApiError} ApiError */

const FOREST_TOP = 15;
const LABEL_LENGTH = 40; // as the top-10 charts shorten op names
const ROW_HEIGHT = 24;
export const FOREST_AXIS_TITLE = 'speedup (baseline / target), adjusted for run speed';

/** The verdicts the forest plot draws, in its legend's order, with the theme colour of each. */
const PLOTTED_VERDICTS = [
  {verdict: 'slower', label: 'significantly slower', colour: '--oc-worse'},
  {verdict: 'faster', label: 'significantly faster', colour: '--oc-better'},
  {verdict: 'within noise', label: 'within noise', colour: '--oc-faint'},
];

/** The marks beside a speedup in the op table; none for `within noise` and `not tested`. */
export const VERDICT_MARKS = {slower: '▲', faster: '▼'};

/**
 * The ops the check finds significantly changed (the server marks them: CheckRow.significant).
 * @param {CheckDocument} check
 * @returns {string[]} op keys, in the check's order
 */
export function significantKeys(check) {
  return check.rows.filter((row) => row.significant).map((row) => row.key);
}

/** `within noise` -> `oc-verdict-within-noise` */
export function verdictClass(verdict) {
  return `oc-verdict-${verdict.replace(/\s+/g, '-')}`;
}

/**
 * What the op table's speedup tooltip says of an op's check; null for an op without an
 * interval (one that ran on one side only).
 * @param {CheckRow} row
 */
export function intervalTitle(row) {
  if (row.speedup_low === null || row.speedup_high === null) return null;
  return `${formatLevel(row.interval_level)} interval ${formatInterval(row.speedup_low, row.speedup_high)} ` +
    `(adjusted for run speed, ` +
    `${formatSpeedup(row.adjusted_speedup)}): ${row.verdict}`;
}

/** A theme colour from the stylesheet, so the plot matches the table in either theme. */
function themeColour(variable) {
  return getComputedStyle(document.documentElement).getPropertyValue(variable).trim();
}

/**
 * The gated, tested ops that moved most: largest |log adjusted speedup| first.
 * @param {CheckDocument} check
 * @returns {CheckRow[]}
 */
export function forestRows(check) {
  const plotted = (row) => row.gated && PLOTTED_VERDICTS.some(({verdict}) => verdict === row.verdict) &&
    row.adjusted_speedup > 0 && row.speedup_low > 0 && row.speedup_high > 0;
  const moved = (row) => Math.abs(Math.log(row.adjusted_speedup));
  return check.rows.filter(plotted).sort((a, b) => moved(b) - moved(a)).slice(0, FOREST_TOP);
}

/**
 * One row per op (the most moved at the top), a point at its adjusted speedup, a bar
 * over its interval (at the confidence its verdict was decided at), on a log axis with a
 * line at 1×.
 * @param {CheckRow[]} rows
 */
function forestFigure(rows) {
  const position = (i) => rows.length - 1 - i;
  const labels = shortenNames(rows.map((row) => row.key), LABEL_LENGTH).map(plotlyText);
  const data = [];
  for (const {verdict, label, colour} of PLOTTED_VERDICTS) {
    const indices = rows.map((row, i) => i).filter((i) => rows[i].verdict === verdict);
    if (!indices.length) continue;
    const color = themeColour(colour);
    const picked = indices.map((i) => rows[i]);
    data.push({
      type: 'scatter', mode: 'markers', name: label,
      x: picked.map((row) => row.adjusted_speedup),
      y: indices.map(position),
      error_x: {type: 'data', symmetric: false, color, thickness: 1.5, width: 3,
                array: picked.map((row) => row.speedup_high - row.adjusted_speedup),
                arrayminus: picked.map((row) => row.adjusted_speedup - row.speedup_low)},
      marker: {color, size: 8},
      customdata: picked.map((row) => [plotlyText(row.key), formatSpeedup(row.adjusted_speedup),
                                       formatInterval(row.speedup_low, row.speedup_high), row.verdict,
                                       formatSpeedup(row.speedup), formatLevel(row.interval_level)]),
      hovertemplate: '%{customdata[0]}<br>%{customdata[1]} adjusted for run speed (%{customdata[4]} as measured)' +
        '<br>%{customdata[5]} interval %{customdata[2]}: %{customdata[3]}<extra></extra>',
    });
  }
  const low = Math.min(1, ...rows.map((row) => row.speedup_low));
  const high = Math.max(1, ...rows.map((row) => row.speedup_high));
  const pad = Math.max(0.05, (Math.log10(high) - Math.log10(low)) * 0.06);
  const range = [Math.log10(low) - pad, Math.log10(high) + pad];
  const top = rows.length - 0.5;
  // The line at 1×, as a trace: data coordinates whatever the axis type.
  data.push({type: 'scatter', mode: 'lines', x: [1, 1], y: [-0.5, top], hoverinfo: 'skip', showlegend: false,
             line: {color: themeColour('--oc-muted'), width: 1, dash: 'dot'}});
  const layout = {
    margin: {l: 8, r: 16, t: 28, b: 40}, height: Math.max(160, 90 + rows.length * ROW_HEIGHT),
    showlegend: true, legend: {orientation: 'h', x: 0, y: 1, yanchor: 'bottom', font: {size: 11}},
    xaxis: {type: 'log', range,
            ...(roundLogTicks(10 ** range[0], 10 ** range[1], (value) => `${value}×`) || {ticksuffix: '×'}),
            title: {text: FOREST_AXIS_TITLE, font: {size: 11}}, zeroline: false},
    // Positions, not names, on the axis: two ops may shorten to the same label.
    yaxis: {automargin: true, range: [-0.5, top], tickfont: {size: 11, family: 'Roboto Mono, monospace'},
            tickvals: rows.map((row, i) => position(i)), ticktext: labels, showgrid: false, zeroline: false},
    font: {family: 'Roboto, sans-serif', size: 12},
    hovermode: 'closest',
  };
  return {data, layout: themedLayout(layout)};
}

/** "6 baseline runs, 6 target runs" */
function pooledText(check) {
  const runs = (count, side) => `${count} ${side} ${count === 1 ? 'run' : 'runs'}`;
  return `${runs(check.baseline.length, 'baseline')}, ${runs(check.target.length, 'target')}`;
}

/** The counts of the tested ops, as the server counted them. */
function countsLine(check) {
  return h('div', {class: 'oc-confidence-counts', id: 'oc-confidence-counts', title: check.headline},
    h('span', {class: check.slower ? 'oc-worse' : ''}, `${check.slower} ops significantly slower`), ' · ',
    h('span', {class: check.faster ? 'oc-better' : ''}, `${check.faster} faster`), ' · ',
    h('span', {}, `${check.within_noise} within noise`));
}

/**
 * @param {CheckRow} step
 * @param {string} basis what the whole step is: `step wall time`, or `op time per step` where a run has no markers
 */
function wholeStep(step, basis) {
  const verdictColour = {slower: 'oc-worse', faster: 'oc-better'}[step.verdict] || '';
  return h('div', {class: 'oc-confidence-step', id: 'oc-confidence-step'},
    // The headline's figure, as every view shows it (on wall time, each side's steady steps
    // pooled). No run speed is taken out of a whole step; with repeats its interval is
    // Welch's on the runs' medians, whose own centre can differ (1.40x beside a 1.34x
    // headline on an H200's three runs a side), so the centre is not shown as the figure.
    h('div', {class: 'oc-kv'}, h('span', {class: 'oc-kv-key', title: basis}, `Whole step (${basis})`),
      h('span', {class: `oc-kv-value ${verdictColour}`}, formatSpeedup(step.speedup))),
    h('div', {class: 'oc-card-detail'},
      `${formatLevel(step.interval_level)} interval ${formatInterval(step.speedup_low, step.speedup_high)} · ` +
      step.verdict));
}

export class ConfidencePanel {
  /**
   * @param {{onCheck: (check: CheckDocument|null) => void}} handlers the verdicts shown
   *   changed (null: none, while a check loads or when there is none)
   */
  constructor({onCheck}) {
    this.onCheck = onCheck;
    this.title = h('div', {class: 'oc-card-title'}, 'Confidence');
    this.body = h('div', {class: 'oc-confidence-body'});
    this.sessionNote = h('div', {class: 'oc-small-print', id: 'oc-confidence-session', hidden: true});
    this.card = h('div', {class: 'oc-card oc-confidence-card', id: 'oc-confidence'}, this.title, this.body,
                  this.sessionNote);
    this.plot = h('div', {class: 'oc-forest', id: 'oc-forest'});
    this.plotTitle = h('h3', {}, `Ops that moved most, with the intervals their verdicts rest on (up to ${FOREST_TOP})`);
    this.plotCard = h('div', {class: 'oc-card oc-chart-card oc-forest-card', hidden: true}, this.plotTitle, this.plot);
    this.element = h('section', {class: 'oc-confidence', 'aria-label': 'confidence'}, this.card, this.plotCard);
    /** @type {CheckDocument|null} */
    this.check = null;
    this.key = null;
    this.requestId = 0;
  }

  /**
   * The check of the runs `params` names; asked again only when they change.
   * @param {Object<string, string>} params the check route's (state.js checkParams)
   * @param {{olderSession: boolean, refusal: string|null}} context whether the comparison
   *   shows a capture other than a run's newest, which is the one the check reads; and why
   *   the check would refuse these runs (the compare summary's check_refusal): then the
   *   card says so and asks nothing (a side of one run is an expected state, not an error)
   */
  async show(params, {olderSession, refusal = null}) {
    this.sessionNote.hidden = !olderSession;
    this.sessionNote.textContent = olderSession ? "The check reads each run's newest capture, not the older one " +
      'chosen above.' : '';
    const key = JSON.stringify(params);
    if (key === this.key) return;
    this.key = key;
    const id = ++this.requestId;
    if (refusal) {
      this.check = null;
      this.onCheck(null);
      this.plotCard.hidden = true;
      this.showRefusal(refusal);
      return;
    }
    this.check = null;
    this.onCheck(null);
    this.plotCard.hidden = true;
    this.body.replaceChildren(h('div', {class: 'oc-confidence-loading'}, h('div', {class: 'oc-spinner'}),
                                "Pooling each run's repeats…"));
    let check;
    try {
      check = await fetchCheck(params);
    } catch (error) {
      if (id !== this.requestId) return; // a newer pair is being checked
      this.showFailure(error);
      return;
    }
    if (id !== this.requestId) return;
    this.check = check;
    this.showCheck(check);
    this.onCheck(check);
    await this.drawForest();
  }

  /**
   * Why these runs get no check, in the check's words: asked again only for other runs.
   * @param {string} reason
   */
  showRefusal(reason) {
    this.body.replaceChildren(h('div', {class: 'oc-panel oc-panel-note oc-confidence-note', id: 'oc-confidence-note',
                                        role: 'note'},
      h('div', {class: 'oc-panel-title'}, 'No confidence intervals for these runs'),
      h('div', {class: 'oc-panel-text'}, reason)));
  }

  /** @param {ApiError} error */
  showFailure(error) {
    if (error.status === 400) {
      // The server's reason for a check it cannot make (a refusal the summary did not foresee)
      this.showRefusal(error.message);
      return;
    }
    this.key = null; // a later choice asks again
    this.body.replaceChildren(messageBox({kind: 'error', title: 'The confidence check failed', text: error.message,
                                          id: 'oc-confidence-message'}));
  }

  /** @param {CheckDocument} check */
  showCheck(check) {
    const runsTitle = `baseline: ${check.baseline.join(', ')}\ntarget: ${check.target.join(', ')}`;
    replaceContent(this.body,
      countsLine(check),
      // what the CLI's verdict says beyond the counts: the check could not see a change of the threshold's size
      check.enough_evidence ? null : h('div', {class: 'oc-confidence-evidence', id: 'oc-confidence-evidence'},
        check.headline),
      check.outlier_runs.length ? h('div', {class: 'oc-card-detail', id: 'oc-confidence-outliers'},
        `left out of the whole step as outliers: ${check.outlier_runs.join(', ')}`) : null,
      h('div', {class: 'oc-card-detail', id: 'oc-confidence-runs', title: runsTitle},
        `pooled: ${pooledText(check)}`),
      check.not_tested ? h('div', {class: 'oc-card-detail'},
        `${check.not_tested} not tested (on one side only, or too small a share of op time)`) : null,
      wholeStep(check.whole_step, check.whole_step_basis),
      h('div', {class: 'oc-small-print', id: 'oc-confidence-noise'}, check.noise),
      ...check.warnings.map((warning) => h('div', {class: 'oc-small-print oc-confidence-warning'}, warning)));
  }

  /** Draw the forest plot of the check shown; again after a theme switch. */
  async drawForest() {
    const check = this.check;
    if (!check) return;
    const rows = forestRows(check);
    this.plotCard.hidden = false;
    if (!rows.length) {
      this.plot.replaceChildren(h('div', {class: 'oc-chart-empty', id: 'oc-forest-empty'},
                                  'No op was tested: each ran on one side only, or takes too small a share of op time.'));
      return;
    }
    let Plotly;
    try {
      Plotly = await loadPlotly();
    } catch (error) {
      this.plot.replaceChildren(h('div', {class: 'oc-chart-empty'}, error.message));
      return;
    }
    if (check !== this.check) return;
    this.plot.querySelector('.oc-chart-empty')?.remove(); // Plotly keeps its own nodes: leave them for react
    const {data, layout} = forestFigure(rows);
    this.plot.style.height = `${layout.height}px`;
    await Plotly.react(this.plot, data, layout, {displayModeBar: false, responsive: true});
  }

  redraw() {
    if (this.check && !this.plotCard.hidden) this.drawForest();
  }
}
