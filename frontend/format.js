// Numbers and words as the tab shows them: human time units, shares, speedups, op
// statuses, and the speedup colour scale.

const STATUS_WORDS = {matched: 'matched', baseline_only: 'baseline only', target_only: 'target only'};

/** The ways to group ops, as the choices say them. */
export const GROUP_BY_LABELS = {name: 'By op name', type: 'By op type'};
// The compare table can also group ops by the module they ran in (sweeps, trends and the
// confidence of a check are per op or op type).
export const COMPARE_GROUP_BY_LABELS = {...GROUP_BY_LABELS, module: 'By module'};

/** `toFixed`, without the minus of a value that rounds to zero ("-0.00"). */
function fixed(value, digits) {
  const text = value.toFixed(digits);
  return /^-0(\.0*)?$/.test(text) ? text.slice(1) : text;
}

export function formatTime(us) {
  if (us === null || us === undefined) return '–';
  const magnitude = Math.abs(us);
  if (magnitude >= 1e6) return `${fixed(us / 1e6, 2)} s`;
  if (magnitude >= 1e3) return `${fixed(us / 1e3, magnitude >= 1e5 ? 0 : magnitude >= 1e4 ? 1 : 2)} ms`;
  if (magnitude >= 100) return `${fixed(us, 0)} µs`;
  if (magnitude >= 10) return `${fixed(us, 1)} µs`;
  return `${fixed(us, 2)} µs`;
}

/** `1536` -> `1.50 KiB`: three significant digits, binary units as memory tools use; mirrors format_bytes in text.py. */
export function formatBytes(size) {
  if (size === null || size === undefined) return '–';
  const magnitude = Math.abs(size);
  for (const [unit, scale] of [['GiB', 2 ** 30], ['MiB', 2 ** 20], ['KiB', 2 ** 10]]) {
    if (magnitude >= scale) {
      const value = size / scale;
      const digits = Math.abs(value) < 10 ? 2 : Math.abs(value) < 100 ? 1 : 0;
      return `${fixed(value, digits)} ${unit}`;
    }
  }
  return `${fixed(size, 0)} B`;
}

const SI = [[1e15, 'P'], [1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];

/** `3.91e12, 'FLOP/s'` -> `3.91 TFLOP/s`: three significant digits; mirrors format_rate in text.py. */
export function formatRate(value, unit) {
  if (value === null || value === undefined) return '–';
  const rounded = Number(value.toPrecision(3)); // first, so 999,999 reads 1 M, not 1000 k
  const [scale, prefix] = SI.find(([size]) => Math.abs(rounded) >= size) || [1, ''];
  return `${Number((rounded / scale).toPrecision(3))} ${prefix}${unit}`;
}

export function formatSignedTime(us) {
  if (us === null || us === undefined) return '–';
  return (us > 0 ? '+' : us < 0 ? '−' : '') + formatTime(Math.abs(us));
}

export function formatShare(share) {
  if (share === null || share === undefined) return '–';
  const percent = share * 100;
  return `${fixed(percent, percent >= 10 ? 1 : 2)}%`;
}

export function formatSpeedup(speedup) {
  if (speedup === null || speedup === undefined) return '–';
  return `${fixed(speedup, speedupDigits(speedup))}×`;
}

const MAX_SPEEDUP_DIGITS = 6;

/** Decimals: as text.py's _speedup_digits (two significant digits below 0.1×). */
function speedupDigits(speedup) {
  if (speedup >= 100) return 0;
  if (speedup >= 10) return 1;
  if (speedup >= 0.1 || speedup <= 0) return 2;
  return Math.min(MAX_SPEEDUP_DIGITS, 1 - Math.floor(Math.log10(speedup)));
}

/**
 * The two runs' headline, as a line above a view of them (Modules, Layers), the number
 * Compare's first card shows: "Whole step: 13.3× faster (step wall time: ...)".
 * @param {{speedup: number|null, per_sample: boolean, text: string}} headline
 */
export function headlineText(headline) {
  if (headline.speedup === null) return `Whole step: no speedup (${headline.text})`;
  const direction = headline.speedup >= 1 ? 'faster' : 'slower';
  return `Whole step${headline.per_sample ? ', per sample' : ''}: ${formatSpeedup(headline.speedup)} ${direction} ` +
    `on the target (${headline.text})`;
}

/** A 95% interval of a speedup ("0.42× – 0.58×"); mirrors format_interval in text.py. */
export function formatInterval(low, high, level) {
  if (low === null || low === undefined || high === null || high === undefined) return '–';
  return `${formatSpeedup(low)} – ${formatSpeedup(high)}` + (level ? ` (${formatLevel(level)})` : '');
}

/** A confidence level: `95%`, `99.69%`: enough digits to tell it from 100%. */
export function formatLevel(level) {
  const round = (value, digits) => Math.round(value * 10 ** digits) / 10 ** digits;
  let digits = 0;
  while (digits < 4 && round(level * 100, digits) >= 100) digits += 1;
  digits = Math.max(digits, Math.round(level * 100) === level * 100 ? 0 : 1);
  return `${(level * 100).toFixed(digits)}%`;
}

/** Where an op's line on the target series (GPU, bf16) crosses its baseline line, in words. */
export function formatBreakeven(batchSize, targetFaster, target) {
  if (batchSize !== null && batchSize !== undefined) {
    return `${target} faster ${targetFaster === 'below' ? 'below' : 'above'} ${fixed(batchSize, batchSize < 10 ? 1 : 0)}`;
  }
  return {always: `${target} always faster`, never: `${target} never faster`,
          mixed: `${target} faster at some sizes only`}[targetFaster] || '–';
}

// One formatter for every count: `toLocaleString` builds one a call, and the table's
// column fitting formats every row's counts (4,973 BERT ops: 214 ms of the first screen).
const COUNTS = new Intl.NumberFormat('en-US');

export function formatCount(count) {
  if (count === null || count === undefined) return '–';
  return COUNTS.format(count);
}

/** Whole samples a second, read as counts ("4,736 samples/s"). */
export function formatThroughput(perSecond) {
  if (perSecond === null || perSecond === undefined) return '–';
  return `${formatCount(Math.round(perSecond))} samples/s`;
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

// Control characters as \xNN, invisible and bidirectional ones as \uNNNN: a right-to-left
// override makes one run's name read as another's. The rule of tb_opcompare/errors.py's
// escape_control_characters, on the same golden cases, but for line breaks and tabs: a
// page cannot be made to forge a line as a terminal can, and tooltips break lines with them.
const INVISIBLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]/g;

/** `text` with control, invisible and bidirectional characters shown as escapes. */
export function visibleText(text) {
  return String(text).replace(INVISIBLE, (char) => {
    const code = char.charCodeAt(0);
    return code < 0xa0 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/**
 * Plotly renders a few HTML tags in labels, and links: entities make it show op names
 * literally (a sidecar's `<a href>` is text, never a link); invisible characters show.
 */
export function plotlyText(text) {
  return visibleText(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * Each name cut to `length` characters so that the names stay told apart (the rule of
 * tb_opcompare/text.py, on the same golden cases). Op names are scope paths that
 * share most segments: segments shared with other names are elided first (longest
 * first), then the others, never a name's own last segment nor one that holds `keep`
 * (the text a filter matched); runs of elided segments become one "…". Where two
 * different names would still read the same, the segments that tell them apart are kept
 * too (a few rounds). A name still too long is cut in the middle.
 */
export function shortenNames(names, length, keep = '') {
  const shared = new Map();
  for (const name of names) {
    for (const segment of new Set(name.split('/').slice(0, -1))) shared.set(segment, (shared.get(segment) || 0) + 1);
  }
  const needle = keep.toLowerCase();
  const protectedSegments = new Map(names.map((name) => [name, new Set()]));
  let short = names.map((name) => shortenOne(name, length, shared, needle, protectedSegments.get(name)));
  for (let round = 0; round < SHORTEN_ROUNDS; round++) {
    const readers = new Map();
    names.forEach((name, i) => readers.set(short[i], (readers.get(short[i]) || new Set()).add(name)));
    const alike = [...readers.values()].filter((group) => group.size > 1);
    if (!alike.length) break;
    for (const group of alike) {
      const splits = [...group].map((name) => new Set(name.split('/')));
      const common = new Set([...splits[0]].filter((segment) => splits.every((split) => split.has(segment))));
      for (const name of group) {
        for (const segment of name.split('/')) if (!common.has(segment)) protectedSegments.get(name).add(segment);
      }
    }
    short = names.map((name) => shortenOne(name, length, shared, needle, protectedSegments.get(name)));
  }
  return short;
}

const SHORTEN_ROUNDS = 3;

/**
 * `name` in two: the start it shares with `other`, back to a separator ("/", "_", "-",
 * "."), and the rest, which tells the two apart (the device, the batch size, …).
 * @returns {[string, string]}
 */
export function splitFromOther(name, other) {
  let same = 0;
  while (same < name.length && name[same] === other[same]) same++;
  const cut = Math.max(...['/', '_', '-', '.'].map((separator) => name.lastIndexOf(separator, same - 1))) + 1;
  return [name.slice(0, cut), name.slice(cut)];
}

/** One name shortened on its own (see shortenNames). */
export function truncateMiddle(text, length) {
  return shortenNames([text], length)[0];
}

function shortenOne(name, length, shared, needle, protectedSegments) {
  if (name.length <= length) return name;
  const parts = name.split('/');
  const kept = parts.map(() => true);
  const joined = () => parts.map((part, i) => (kept[i] ? part : '…'))
    .filter((part, i, all) => part !== '…' || all[i - 1] !== '…').join('/');
  const order = parts.slice(0, -1).map((_, i) => i)
    .filter((i) => !protectedSegments.has(parts[i]) && !(needle && parts[i].toLowerCase().includes(needle)))
    .sort((a, b) => (shared.get(parts[b]) - shared.get(parts[a])) || (parts[b].length - parts[a].length) || (a - b));
  let text = joined();
  for (const i of order) {
    if (text.length <= length) break;
    kept[i] = false;
    text = joined();
  }
  if (text.length <= length) return text;
  const tail = Math.ceil((length - 1) * 0.6);
  return `${name.slice(0, length - 1 - tail)}…${name.slice(name.length - tail)}`;
}
