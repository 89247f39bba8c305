// Numbers and words as the tab shows them: human time units, shares, speedups, op
// statuses, and the speedup colour scale.

const STATUS_WORDS = {matched: 'matched', baseline_only: 'baseline only', target_only: 'target only'};

/** The ways to group ops, as the choices say them. */
export const GROUP_BY_LABELS = {name: 'By op name', type: 'By op type'};

export function formatTime(us) {
  if (us === null || us === undefined) return '–';
  const magnitude = Math.abs(us);
  if (magnitude >= 1e6) return `${(us / 1e6).toFixed(2)} s`;
  if (magnitude >= 1e3) return `${(us / 1e3).toFixed(magnitude >= 1e5 ? 0 : magnitude >= 1e4 ? 1 : 2)} ms`;
  if (magnitude >= 100) return `${us.toFixed(0)} µs`;
  if (magnitude >= 10) return `${us.toFixed(1)} µs`;
  return `${us.toFixed(2)} µs`;
}

export function formatSignedTime(us) {
  if (us === null || us === undefined) return '–';
  return (us > 0 ? '+' : us < 0 ? '−' : '') + formatTime(Math.abs(us));
}

export function formatShare(share) {
  if (share === null || share === undefined) return '–';
  const percent = share * 100;
  return `${percent >= 10 ? percent.toFixed(1) : percent.toFixed(2)}%`;
}

export function formatSpeedup(speedup) {
  if (speedup === null || speedup === undefined) return '–';
  if (speedup >= 100) return `${speedup.toFixed(0)}×`;
  if (speedup >= 10) return `${speedup.toFixed(1)}×`;
  return `${speedup.toFixed(2)}×`;
}

export function formatCount(count) {
  if (count === null || count === undefined) return '–';
  return count.toLocaleString('en-US');
}

/** A row status in words ("baseline only"); a status the tab does not know, as it is. */
export function formatStatus(status) {
  return STATUS_WORDS[status] || status;
}

export function capitalise(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/**
 * Speedup on a log scale: 1× is neutral, faster is green, slower is red, saturating at
 * 16× either way, so 2× faster and 2× slower look equally strong.
 */
export function speedupColor(speedup) {
  if (!speedup || !isFinite(speedup)) return null;
  const strength = Math.min(Math.abs(Math.log2(speedup)) / 4, 1);
  const hue = speedup >= 1 ? 122 : 4; // material green / red
  const lightness = 96 - strength * 44;
  const saturation = 35 + strength * 30;
  return {
    background: `hsl(${hue}, ${saturation}%, ${lightness}%)`,
    color: lightness < 62 ? '#fff' : '#212121',
  };
}

/** Parse a time typed by a user ("250", "250us", "1.5ms", "2 s") into microseconds. */
export function parseTime(text) {
  const match = /^\s*([0-9]*\.?[0-9]+)\s*(us|µs|ms|s)?\s*$/i.exec(text || '');
  if (!match) return null;
  const scale = {us: 1, 'µs': 1, ms: 1e3, s: 1e6}[(match[2] || 'us').toLowerCase()];
  return parseFloat(match[1]) * scale;
}

/** Plotly renders a few HTML tags in labels; entities make it show op names literally. */
export function plotlyText(text) {
  return String(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * Shorten an op name to `length` characters. Op names are scope paths that share long
 * prefixes and differ in a few segments ("gradients/layer_1/…/MatMul_grad/MatMul_1"),
 * so whole segments are elided, longest first, never the op's own last segment; runs
 * of elided segments become one "…".
 */
export function truncateMiddle(text, length) {
  if (text.length <= length) return text;
  const parts = text.split('/');
  const kept = parts.map(() => true);
  const joined = () => parts.map((part, i) => (kept[i] ? part : '…'))
    .filter((part, i, all) => part !== '…' || all[i - 1] !== '…').join('/');
  let shortened = joined();
  while (shortened.length > length) {
    let longest = -1;
    for (let i = 0; i < parts.length - 1; i++) {
      if (kept[i] && (longest < 0 || parts[i].length > parts[longest].length)) longest = i;
    }
    if (longest < 0) break;
    kept[longest] = false;
    shortened = joined();
  }
  if (shortened.length <= length) return shortened;
  const tail = Math.ceil((length - 1) * 0.6);
  return `${text.slice(0, length - 1 - tail)}…${text.slice(text.length - tail)}`;
}
