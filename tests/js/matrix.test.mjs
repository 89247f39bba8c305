// The Matrix view's rules, on a document shaped as the matrix route answers it (no
// browser: the drawing itself is checked in tests/test_tab_matrix.py).

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {comparedRuns, matrixGrid, poolText, rangeText, sortGrid} from '../../frontend/views/matrix.js';

const CPU = 'CPU';
const GPU = 'GPU';
const cell = (model, batchSize, column, latency, runs, extra = {}) => ({
  model, precision: 'fp32', compiler: 'eager', batch_size: batchSize, column, runs, steps: 5 * runs.length,
  warmup_steps: 1, latency_us: latency,
  latency_std_us: latency === null ? null : latency / 10, latency_p10_us: latency === null ? null : latency * 0.9,
  latency_p90_us: latency === null ? null : latency * 1.1, throughput_per_s: latency === null ? null : batchSize * 1e6 / latency,
  speedup: null, reference: column === CPU, ...extra,
});
const row = (model, batchSize, precision = 'fp32') => ({model, precision, compiler: 'eager', batch_size: batchSize});
const MATRIX = {
  reference: CPU, warmup: null,
  columns: [{key: CPU, device: 'CPU'}, {key: GPU, device: 'GPU'}],
  rows: [row('cnn', 1), row('cnn', 16), row('cnn', 16, 'bf16'), row('mlp', 16)],
  cells: [cell('cnn', 1, CPU, 2000, ['cnn_cpu_bs1']), cell('cnn', 1, GPU, 3000, ['cnn_gpu_bs1_rep1', 'cnn_gpu_bs1_rep2']),
          cell('cnn', 16, CPU, 4000, ['cnn_cpu_bs16']), cell('cnn', 16, GPU, 1000, ['cnn_gpu_bs16']),
          cell('cnn', 16, GPU, 500, ['cnn_gpu_bs16_bf16'], {precision: 'bf16'}),
          cell('mlp', 16, GPU, null, ['mlp_gpu_bs16'])],
  warnings: [],
};

test('each row holds its cells by column, in the route\'s row order; a missing cell stays empty', () => {
  const grid = matrixGrid(MATRIX);
  assert.deepEqual(grid.map((entry) => [entry.row.model, entry.row.precision, entry.row.batch_size]),
                   [['cnn', 'fp32', 1], ['cnn', 'fp32', 16], ['cnn', 'bf16', 16], ['mlp', 'fp32', 16]]);
  assert.deepEqual(grid[0].cells.get(GPU).runs, ['cnn_gpu_bs1_rep1', 'cnn_gpu_bs1_rep2']);
  // a configuration is a row of its own: bf16's GPU cell is not fp32's
  assert.deepEqual(grid[1].cells.get(GPU).runs, ['cnn_gpu_bs16']);
  assert.deepEqual(grid[2].cells.get(GPU).runs, ['cnn_gpu_bs16_bf16']);
  assert.equal(grid[3].cells.get(CPU), undefined);
});

test('rows sort by one column\'s latency, rows without it last either way', () => {
  const models = (sort) => sortGrid(matrixGrid(MATRIX), sort)
    .map((entry) => `${entry.row.model}${entry.row.batch_size}${entry.row.precision === 'bf16' ? 'h' : ''}`);
  assert.deepEqual(models({column: GPU, order: 'desc'}), ['cnn1', 'cnn16', 'cnn16h', 'mlp16']);
  assert.deepEqual(models({column: GPU, order: 'asc'}), ['cnn16h', 'cnn16', 'cnn1', 'mlp16']);
  assert.deepEqual(models({column: CPU, order: 'asc'}), ['cnn1', 'cnn16', 'cnn16h', 'mlp16']);
  assert.deepEqual(models({column: null, order: 'asc'}), ['cnn1', 'cnn16', 'cnn16h', 'mlp16']);
});

test('a cell opens the comparison of its row\'s reference run with its own first run', () => {
  const [bs1, , bf16, mlp] = matrixGrid(MATRIX);
  assert.deepEqual(comparedRuns(bs1, bs1.cells.get(GPU)), {baseline: 'cnn_cpu_bs1', target: 'cnn_gpu_bs1_rep1'});
  assert.equal(comparedRuns(bs1, bs1.cells.get(CPU)), null); // the reference cell itself
  assert.equal(comparedRuns(mlp, mlp.cells.get(GPU)), null); // no reference run in the row
  assert.equal(comparedRuns(bf16, bf16.cells.get(GPU)), null); // nor in bf16's: fp32's CPU run is another configuration
});

test('the tooltip says what a cell pools; the range reads as the tab writes numbers', () => {
  const gpu = MATRIX.cells[1];
  assert.equal(poolText(gpu), '2 runs pooled: cnn_gpu_bs1_rep1, cnn_gpu_bs1_rep2\n10 steady steps, 1 warm-up step left out\n' +
    'standard deviation 300 µs');
  assert.equal(poolText(MATRIX.cells[5]), '1 run pooled: mlp_gpu_bs16\n5 steady steps, 1 warm-up step left out\n' +
    'no step markers: no latency');
  assert.equal(rangeText(gpu), 'p10–p90 2.70 ms – 3.30 ms');
  assert.equal(rangeText(MATRIX.cells[5]), null);
});
