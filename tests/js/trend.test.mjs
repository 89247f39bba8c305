// The Trend view's figures and the Confidence check's significant ops, from documents
// shaped as the routes answer them (no browser: the drawing itself is checked in
// tests/test_tab_trend.py and tests/test_tab_significant.py).

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {significantKeys} from '../../frontend/views/confidence.js';
import {WHOLE_STEP, modelRuns, pointLabels, timeTicks, trendFigures} from '../../frontend/views/trend.js';

const TREND = {
  order_by: 'sidecar:versions.torch', group_by: 'name',
  points: [{value: '2.5', runs: ['a_rep1', 'a_rep2']}, {value: '2.13', runs: ['b']}, {value: '<b>x</b>', runs: ['c']}],
  keys: ['aten::mm', 'aten::conv', WHOLE_STEP],
  rows: [
    {key: 'aten::mm', point: 0, mean_us: 100, low_us: 80, high_us: 125, runs: 2},
    {key: 'aten::conv', point: 0, mean_us: 300, low_us: 250, high_us: 360, runs: 2},
    {key: WHOLE_STEP, point: 0, mean_us: 5000, low_us: 4000, high_us: 6000, runs: 2},
    {key: 'aten::mm', point: 1, mean_us: 90, low_us: null, high_us: null, runs: 1},
    {key: WHOLE_STEP, point: 1, mean_us: 4500, low_us: null, high_us: null, runs: 1},
    {key: 'aten::mm', point: 2, mean_us: 95, low_us: null, high_us: null, runs: 1},
    {key: 'aten::conv', point: 2, mean_us: 310, low_us: null, high_us: null, runs: 1},
    {key: WHOLE_STEP, point: 2, mean_us: 4700, low_us: null, high_us: null, runs: 1},
  ],
  whole_step_basis: 'step wall time',
  warnings: [],
};

test('one line per op over the points, the whole step on its own figure', () => {
  const {ops, step} = trendFigures(TREND);
  assert.deepEqual(ops.data.map((trace) => trace.meta), ['aten::mm', 'aten::conv']);
  assert.deepEqual(step.data.map((trace) => trace.meta), ['(whole step)']);
  assert.deepEqual(ops.data[0].x, [0, 1, 2]);
  assert.deepEqual(ops.data[0].y, [100, 90, 95]);
  assert.deepEqual(ops.data[1].y, [300, null, 310]); // a point without the op is a gap
  assert.equal(ops.layout.yaxis.type, 'log');
  assert.equal(ops.layout.xaxis.type, 'category');
  assert.deepEqual(ops.layout.xaxis.tickvals, [0, 1, 2]);
  // the whole step's title says what it is: the headline's wall time, or op time where no step has markers
  assert.equal(step.layout.title.text, 'Whole step: median steady step wall time (step markers)');
  assert.equal(trendFigures({...TREND, whole_step_basis: 'op time per step'}).step.layout.title.text,
               'Whole step: all op time of a profiled step (no step markers)');
});

test('bars from low_us to high_us where a point has an interval, none where no point has', () => {
  const {ops} = trendFigures(TREND);
  assert.deepEqual(ops.data[0].error_y.array, [25, null, null]);
  assert.deepEqual(ops.data[0].error_y.arrayminus, [20, null, null]);
  const single = {...TREND, rows: TREND.rows.map((row) => ({...row, low_us: null, high_us: null}))};
  assert.equal(trendFigures(single).ops.data[0].error_y, undefined);
});

test('each point is labelled with its value, escaped, and the runs it pools', () => {
  assert.deepEqual(pointLabels(TREND), ['2.5<br>2 runs', '2.13<br>1 run', '&lt;b&gt;x&lt;/b&gt;<br>1 run']);
});

test('the hover says the value, the runs, the mean and the interval', () => {
  const [mm] = trendFigures(TREND).ops.data;
  assert.deepEqual(mm.customdata[0], ['2.5', '2 runs (a_rep1, a_rep2)', '100 µs', '95% interval 80.0 µs – 125 µs']);
  assert.deepEqual(mm.customdata[1], ['2.13', '1 run (b)', '90.0 µs', 'one run: no interval']);
});

test('a trend of the whole step alone has no ops figure', () => {
  const {ops, step} = trendFigures({...TREND, keys: [WHOLE_STEP]});
  assert.equal(ops, null);
  assert.deepEqual(step.data[0].y, [5000, 4500, 4700]);
});

test('time ticks are round and read as times', () => {
  assert.deepEqual(timeTicks(40, 3000), {tickvals: [50, 100, 200, 500, 1000, 2000],
                                         ticktext: ['50 µs', '100 µs', '200 µs', '500 µs', '1 ms', '2 ms']});
  assert.deepEqual(timeTicks(5500, 9500).tickvals, [6000, 7000, 8000, 9000]);
  // a pooled interval across fifteen decades (a CPU and a GPU run at one point) read 1000000000 s ... 0 µs in
  // some sixty labels: now at most twelve powers of ten
  const wide = timeTicks(1e-6, 1e15);
  assert.ok(wide.tickvals.length <= 12 && wide.tickvals.length >= 3, String(wide.tickvals));
  assert.ok(wide.tickvals.every((value) => Number.isInteger(Math.log10(value))));
  // one run's whole step (kineto's ResNet-50, 152 ms) spans no 1-9 x 10^n: plotly's own ticks read a bare `170k`
  assert.deepEqual(timeTicks(137_000, 169_000), {tickvals: [140_000, 150_000, 160_000],
                                                 ticktext: ['140 ms', '150 ms', '160 ms']});
  assert.equal(timeTicks(0, 100), null);
  assert.equal(timeTicks(100, 100), null);
});

test('a sidecar field in the axis title is text, never a link', () => {
  const {ops} = trendFigures({...TREND, order_by: 'sidecar:<a href="http://evil">x</a>'});
  assert.equal(ops.layout.xaxis.title.text, 'sidecar field &lt;a href="http://evil"&gt;x&lt;/a&gt;');
});

test("the default runs are the baseline's model's, in the listing's order", () => {
  const listing = {runs: [{run: 'cnn_rep1', model: 'cnn'}, {run: 'mlp', model: 'mlp'}, {run: 'cnn_rep2', model: 'cnn'}]};
  assert.deepEqual(modelRuns(listing, 'cnn_rep2'), {model: 'cnn', runs: ['cnn_rep1', 'cnn_rep2']});
  assert.equal(modelRuns(listing, 'gone'), null);
  assert.equal(modelRuns(null, 'cnn_rep1'), null);
});

test("significant changes are the rows the server marks, in the check's order", () => {
  const row = (key, significant) => ({key, verdict: significant ? 'slower' : 'within noise', significant});
  const check = {rows: [row('a', true), row('b', false), row('c', true)]};
  assert.deepEqual(significantKeys(check), ['a', 'c']);
});

test('the step\'s parts are lines beside the whole step, never among the ops', () => {
  const input = '(step) waiting for input';
  const parts = {
    ...TREND,
    keys: [...TREND.keys, input],
    rows: [...TREND.rows, ...[3000, 200, 250].map((mean, point) => ({key: input, point, mean_us: mean, low_us: mean,
                                                                     high_us: mean, runs: 1}))],
  };
  const {ops, step} = trendFigures(parts);
  assert.deepEqual(ops.data.map((trace) => trace.meta), ['aten::mm', 'aten::conv']);
  assert.deepEqual(step.data.map((trace) => trace.meta), ['(whole step)', input]);
  assert.deepEqual(step.data[1].y, [3000, 200, 250]);
  assert.equal(step.layout.showlegend, true);
  assert.match(step.layout.title.text, /and what it was spent on$/);
  assert.equal(trendFigures(TREND).step.layout.showlegend, false); // no parts: no legend
});
