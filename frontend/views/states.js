// What a view shows instead of its content: while it loads, when it failed, and when the
// logdir has nothing to compare.

import {fetchReads} from '../api.js';
import {h, setText} from '../dom.js';

// How often a spinner on screen asks the server what it is reading (the server shows a
// read once it has taken 2 s, so a quick answer never asks at all).
const READS_POLL_MS = 1000;

/**
 * A spinner with what is being waited for: in place of a page, or as an overlay over its
 * content (hidden until shown). While it is on screen, a line under it says which slow
 * read the server is at, for how long, and about how long is left.
 * @param {string} text
 * @param {{overlay?: boolean}} [options]
 */
export function loadingIndicator(text, {overlay = false} = {}) {
  const progress = h('span', {class: 'oc-loading-progress', role: 'status'});
  const element = h('div', {class: overlay ? 'oc-loading' : 'oc-loading oc-loading-page', hidden: overlay},
    h('div', {class: 'oc-spinner'}), h('span', {class: 'oc-loading-text'}, text), progress);
  watchReads(element, progress);
  return element;
}

/** Poll the server's slow reads while `element` is on screen; stop once it has left the page. */
function watchReads(element, progress) {
  let attached = false;
  const tick = async () => {
    if (!element.isConnected) {
      if (attached) return;  // replaced: this spinner is gone for good
    } else {
      attached = true;
      if (element.hidden || !element.offsetParent) {
        setText(progress, '');
      } else {
        let text = '';
        try {
          text = (await fetchReads()).text;
        } catch (error) {
          text = '';  // the page's own request reports a server that is gone
        }
        setText(progress, element.hidden ? '' : text);
      }
    }
    setTimeout(tick, READS_POLL_MS);
  };
  setTimeout(tick, READS_POLL_MS);
}

/**
 * @param {{kind: 'error'|'warning'|'note', title: string, text: string, hint?: string|null, id: string}} message
 */
export function messageBox({kind, title, text, hint = null, id}) {
  return h('div', {class: `oc-panel oc-panel-${kind}`, id, role: 'alert'},
    h('div', {class: 'oc-panel-title'}, title), h('div', {class: 'oc-panel-text'}, text),
    hint ? h('div', {class: 'oc-panel-hint'}, hint) : null);
}

function snippet(title, code) {
  return h('div', {class: 'oc-snippet'}, h('div', {class: 'oc-label'}, title), h('pre', {}, h('code', {}, code)));
}

/** A logdir without a readable profile run: how to record one. */
export function emptyLogdir() {
  return h('div', {class: 'oc-empty', id: 'oc-empty'},
    h('h2', {}, 'No profile runs found in this logdir'),
    h('p', {}, 'Op Compare reads the profiles TensorFlow and PyTorch already write. Profile the same model ',
      'twice, on CPU and on GPU (or at several batch sizes), into one logdir; runs named ',
      h('code', {}, 'mnist_cpu_bs32'), ' and ', h('code', {}, 'mnist_gpu_bs32'), ' pair automatically.'),
    snippet('Keras',
      'tf.keras.callbacks.TensorBoard(log_dir="logs/mnist_cpu_bs32", profile_batch=(10, 15))'),
    snippet('TensorFlow profiler',
      'tf.profiler.experimental.start("logs/mnist_gpu_bs32")\n# ... a few training steps ...\n' +
      'tf.profiler.experimental.stop()'),
    snippet('PyTorch',
      'with torch.profiler.profile(\n    schedule=torch.profiler.schedule(wait=1, warmup=1, active=5),\n' +
      '    on_trace_ready=torch.profiler.tensorboard_trace_handler("logs/mnist_torch_cpu_bs32"),\n' +
      '    record_shapes=True) as profiler:\n    for batch in loader:\n        train_step(batch)\n' +
      '        profiler.step()'),
    h('p', {}, 'Also read: TF1 ', h('code', {}, 'RunMetadata'), ' timelines (Chrome trace JSON) and ',
      h('code', {}, 'trace.json.gz'), ' from TF 2.0–2.3. New runs show up when you reload this tab.'));
}
