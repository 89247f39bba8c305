// Where two run names part (frontend/format.js splitFromOther): a summary card gives up
// the shared start of a long name before the part that tells the two runs apart.
import assert from 'node:assert/strict';
import {test} from 'node:test';

import {splitFromOther} from '../../frontend/format.js';

test('the shared start ends at the separator before the names part', () => {
  assert.deepEqual(splitFromOther('torch/mnist_cnn_torch_cpu_bs64', 'torch/mnist_cnn_torch_gpu_bs64'),
                   ['torch/mnist_cnn_torch_', 'cpu_bs64']);
  assert.deepEqual(splitFromOther('tf_keras/cnn_cpu_bs32/train', 'tf_keras/cnn_cpu_bs2/train'),
                   ['tf_keras/cnn_cpu_', 'bs32/train']);
});

test('names that part at once share nothing; a name and its extension share the name', () => {
  assert.deepEqual(splitFromOther('cpu_run', 'gpu_run'), ['', 'cpu_run']);
  assert.deepEqual(splitFromOther('x/y', 'x/y/z'), ['x/', 'y']);
});
