// Generated from tb_opcompare/schema/contract.py by `make contract`; do not edit.
// The documents the tab receives from the plugin's routes, as JSDoc types.

/**
 * `runs`: every run, the automatic pairs, what could not be read.
 * @typedef {Object} RunsDocument
 * @property {Array<RunRecord>} runs
 * @property {Array<Pair>} pairs - CPU -> accelerator pairs of one model, batch size, precision and compiler
 * @property {Array<Pair>} variant_pairs - pairs that differ in precision or compiler only (same model, device and batch size), the default (fp32, eager) as the baseline
 * @property {Array<RunError>} errors
 * @property {boolean} complete - every run's trace has been read
 * @property {SuggestedPair|null} suggested
 * @property {Array<string>} notices - what the user should know about the logdir (e.g. no accelerator run)
 * @property {string} version - the plugin's version
 */

/**
 * One run: its facts from the data, else its sidecar, else its name (the `*_source` fields say which). Runs listed with `load=0` and not yet read carry the claims only.
 * @typedef {Object} RunRecord
 * @property {string} run - path of the run under the logdir, `/`-separated; the run's name everywhere
 * @property {string} format - xplane, tf_trace_json, pytorch, chrome_trace, summary_json or empty_session
 * @property {string|null} device - CPU, or the accelerator that did the work (GPU, TPU, ...)
 * @property {string|null} device_name - the accelerator's model name where the profile or sidecar gives it
 * @property {number|null} batch_size - samples per step
 * @property {string|null} batch_size_source - where the batch size came from: `data: ...`, the sidecar or the run name
 * @property {number|null} batch_size_agreement - share of the data's evidence that agrees on the batch size (PyTorch; TF memory allocations)
 * @property {number|null} steps - profiled steps
 * @property {string|null} steps_source - where the step count came from
 * @property {number|null} step_time_us - median wall time of a steady profiled step (warm-up left out), µs, where step markers give it: the headline's figure
 * @property {string} model - model key: the sidecar's model, else the run name without device, batch, repeat and time tokens; runs whose names hide the model are joined by their ops (`model_source`)
 * @property {string} model_source - how the model was found: `sidecar`, `run name`, or `data: …` naming the run whose ops joined it (the same ops at another batch size, or the CPU/accelerator counterpart)
 * @property {string|null} label - the sidecar's label
 * @property {number|null} repeat - which recording of one configuration (`--repeats`)
 * @property {number|null} repeat_runs - the runs of its repeat group (same model, device, batch size and label, each a repeat), itself included: what pooling its repeats would pool; 1 for a run without repeats; null outside the runs document
 * @property {Array<string>} sessions - the run's captures, oldest first; a distributed job's capture of all its ranks comes after one session per rank of it (`… (rank 1 of 2 only)`), to compare one rank
 * @property {string} session - the capture shown (the newest)
 * @property {string|null} framework - TensorFlow or PyTorch, where the data says
 * @property {string|null} precision - the dtypes the model computed in: `fp32`, `bf16`, `fp16`, or `mixed bf16/fp32` (most first) where no dtype holds 90% of the compute ops
 * @property {string|null} precision_source - where the precision came from: `data: ...` or the sidecar
 * @property {string|null} compiler - `eager`, `torch.compile`, `XLA` ...
 * @property {string|null} compiler_source - where the compiler came from: `data: ...` or the sidecar
 * @property {Object<string, number>} peak_memory_bytes - memory in use at its highest per device (`CPU`, `GPU:0`), where the profile records memory; empty otherwise
 * @property {Array<string>} warnings - what the user should know about this run's facts
 * @property {boolean} loaded - whether the trace has been read (else only names and sidecars were)
 * @property {string|null} [read_from] - where the run's numbers were read: `the profile` (this tool read its files, cached after) or the logdir's shared index and who wrote it (`the shared index (.opcompare/), written by tb-opcompare VERSION (reader N)`, the versions the index's entry records); null where the trace has not been read
 * @property {Array<WorkerRecord>} [workers] - the ranks of one distributed job read together as this run, each with its own figures; the run's ops pool every rank's executions and its step is its slowest rank's. Empty for a profile of one process
 */

/**
 * One rank of a distributed job whose traces were read together as one run.
 * @typedef {Object} WorkerRecord
 * @property {number|null} rank - the rank its trace names (`distributedInfo`)
 * @property {number|null} world_size - the job's ranks in all, whether or not every rank's trace is in the logdir
 * @property {string} file - its trace file
 * @property {number|null} steps - its profiled steps
 * @property {number|null} step_time_us - its median steady step wall time, µs: the run's step is its slowest rank's
 * @property {number} host_op_time_us - its host ops' self time, summed, µs
 * @property {Object<string, number>} [step_parts] - its own median steady step's host parts, µs by category (Compare's breakdown; the job's is its slowest rank's, step by step); empty where its trace splits no step
 */

/**
 * An automatic baseline/target pair: the CPU and the accelerator run of one model.
 * @typedef {Object} Pair
 * @property {string} baseline
 * @property {string} target
 * @property {string} model
 * @property {number|null} batch_size
 * @property {string} matched_by - `run names`, `one model, found from the ops` (`RunRecord.model_source`), `op names (Jaccard …)`, or `run facts` (variant pairs)
 * @property {boolean} guess - paired by op-name overlap alone: worth a look before trusting
 * @property {string} [varies] - the one dimension the two runs differ in: `device` (CPU -> accelerator), `precision` (fp32 -> another) or `compiler` (eager -> a compiler)
 */

/**
 * A run that cannot be read, with the file and the reason.
 * @typedef {Object} RunError
 * @property {string} run
 * @property {string} path
 * @property {string} message
 */

/**
 * The pair the tab opens on, and why.
 * @typedef {Object} SuggestedPair
 * @property {string} baseline
 * @property {string} target
 * @property {string} reason
 */

/**
 * `compare`: the summary and the rows the view keeps, in its order.
 * @typedef {Object} CompareDocument
 * @property {CompareSummary} summary
 * @property {Array<string>} columns - the fields of a row, in order
 * @property {Array<CompareRow>} rows
 * @property {number} total_rows - rows before the view's filter and top N
 * @property {number} view_rows - rows the view's filter keeps, before its top N (the tab caps a big comparison with `top` and says how many match)
 */

/**
 * Whole-run figures of a comparison.
 * @typedef {Object} CompareSummary
 * @property {number|null} headline_speedup - the speedup a user reads first, the same in every view for the same runs: baseline over target median steady step wall time (step markers, each run's warm-up left out, a group's steps pooled), per sample where the batch sizes differ; where a side has no step markers, op time per step (see headline_basis)
 * @property {'op time'|'op time per step'|'step wall time'} headline_basis - what headline_speedup is the ratio of
 * @property {boolean} headline_per_sample - headline_speedup compares time per sample (the batch sizes differ)
 * @property {string} headline_text - headline_speedup's basis in words, with the two times it is the ratio of
 * @property {number|null} baseline_step_wall_us - median steady step wall time, µs; null without step markers
 * @property {number|null} target_step_wall_us - as baseline_step_wall_us, for the target
 * @property {number} matched_ops
 * @property {number} baseline_only_ops
 * @property {number} target_only_ops
 * @property {number} faster_ops - matched ops with speedup > 1
 * @property {number} noisy_ops - matched ops noisy on either side
 * @property {number} slower_ops - matched ops with speedup < 1
 * @property {number} baseline_matched_total_us - op time of the matched ops, µs
 * @property {number} target_matched_total_us
 * @property {number} baseline_total_us - all op time, µs
 * @property {number} target_total_us
 * @property {number|null} overall_speedup - ratio of matched op time (not wall time), per step where both runs know their steps
 * @property {'per step'|'whole profile'} overall_speedup_basis
 * @property {number|null} geomean_speedup - geometric mean of the matched ops' speedups
 * @property {number|null} baseline_steps
 * @property {number|null} target_steps
 * @property {number|null} baseline_time_per_step_us
 * @property {number|null} target_time_per_step_us
 * @property {number|null} whole_step_speedup - all op time per step, ops on one side included
 * @property {number|null} per_sample_speedup - whole_step_speedup per sample, where the batch sizes differ
 * @property {number|null} op_time_speedup - the one op time ratio shown beside the headline: per_sample_speedup where the batch sizes differ, else whole_step_speedup, else all op time over the whole profiles
 * @property {'per sample'|'per step'|'whole profile'} op_time_basis - what op_time_speedup is over
 * @property {string|null} check_refusal - why the check route would refuse these runs with their repeats (a side of one run), in its words; null where it can check them. The tab says it instead of asking
 * @property {'module'|'name'|'type'} group_by
 * @property {boolean} normalized_types
 * @property {RunRecord} baseline - the baseline run; for a run group, its first run's record with the group's steps
 * @property {RunRecord} target - as baseline, for the target
 * @property {Array<string>} baseline_runs - the runs pooled on the baseline side (one, unless a run group was asked for: their executions together)
 * @property {Array<string>} target_runs - as baseline_runs, on the target side
 * @property {Array<string>} notes - how to read the headline figures (batch sizes differ, no op in common, ...)
 * @property {StepBreakdown|null} [breakdown] - where the time went: each side's median steady step by what it was spent on; null where a side's profile does not split its steps (breakdown_note says why)
 * @property {string|null} [breakdown_note] - why there is no breakdown, or what it cannot tell apart
 */

/**
 * Where the time went: each side's median steady step (the headline's) split by what it was spent on, and the change as a waterfall from the baseline's step to the target's.
 * @typedef {Object} StepBreakdown
 * @property {number} baseline_wall_us - the baseline's median steady step wall time, µs: the waterfall's start
 * @property {number} target_wall_us - the target's, µs: its end; the host parts' change_us add up to the difference
 * @property {number} baseline_steps - steady steps the baseline's median is of
 * @property {number} target_steps - as baseline_steps, for the target
 * @property {Array<BreakdownPart>} parts
 * @property {Array<RunBreakdown>} runs - where a side pools runs (repeats), or is a job of several ranks: each run's or rank's own split, so one whose step went elsewhere (a hiccup; a rank waiting on the others) shows; empty otherwise
 */

/**
 * What one category of a step took on each side (issue 53).
 * @typedef {Object} BreakdownPart
 * @property {'device'|'host'} side - `host`: the thread that drives the step, each moment once, so a side's host parts add up to its step wall time; `device`: the accelerator's time in the step, busy by what ran and idle
 * @property {string} category - a key of the vocabulary every format shares (`input`, `forward`, `device_idle`, ...)
 * @property {string} label - the category in words, as shown
 * @property {number|null} baseline_us - its time in the baseline's median steady step, µs (0: none); null for a device part where the baseline ran on no device (a CPU run: its device parts add up to nothing)
 * @property {number|null} target_us - as baseline_us, for the target
 * @property {number|null} change_us - target_us - baseline_us: the bar of the waterfall (negative: time saved); null where either side is null
 */

/**
 * One run of a side that pools runs (repeats), or one rank of a side that is a job: its own median steady step, split.
 * @typedef {Object} RunBreakdown
 * @property {'baseline'|'target'} side - the side it is pooled into
 * @property {string} run - the run, or `rank N` of a job (whose split is its slowest rank's, step by step)
 * @property {number} wall_us - its median steady step wall time, µs
 * @property {number} steps - its steady steps
 * @property {Object<string, number>} host - its host parts, µs by category (adding up to wall_us), in the vocabulary's order
 */

/**
 * One op (or op type) of a comparison; `baseline_*` and `target_*` are the same figures per run.
 * @typedef {Object} CompareRow
 * @property {string} key - op name (group_by=name), normalised op type (group_by=type), or module path (group_by=module: `Sequential_0/Conv2d_0`, a TF name scope, `(outside modules)`); by name, one framework op's backend implementations found on one side each are one row, `baseline names → target names` (`aten::mkldnn_convolution → aten::cudnn_convolution`), its `op_type` the framework op
 * @property {string|null} op_type - normalised op type (oneDNN/cuDNN variants share one)
 * @property {'baseline_only'|'matched'|'target_only'} status - whether the op is in both runs or in one only
 * @property {number|null} speedup - baseline_mean_us / target_mean_us (> 1: the target is faster)
 * @property {number|null} delta_mean_us - target_mean_us - baseline_mean_us (< 0: the target is faster)
 * @property {number|null} baseline_occurrences - times the op ran in that run
 * @property {number|null} baseline_mean_us - self time per occurrence, µs
 * @property {number|null} baseline_total_us - self time summed over the run, µs
 * @property {number|null} baseline_share - total_us / all op time of that run
 * @property {'device'|'host'|'mixed'|null} baseline_time_source - `device` where the op launched kernels (its time is the kernels'), else `host`; `mixed` when a type groups both
 * @property {number|null} baseline_p10_us - 10th percentile of one occurrence's self time (null where occurrences are not told apart, as for kernels no host op launched, or for a type grouping ops)
 * @property {number|null} baseline_median_us - median of one occurrence's self time
 * @property {number|null} baseline_p90_us - 90th percentile of one occurrence's self time
 * @property {number|null} baseline_cv - coefficient of variation of one occurrence's self time (std / mean)
 * @property {boolean|null} baseline_noisy - 3 or more occurrences and a CV above 0.5: the mean hides a wide spread, so its speedup is unreliable
 * @property {number|null} baseline_kernels_per_execution - device kernels (memcpys, memsets) per occurrence where the time is device time; null for host time
 * @property {number|null} baseline_per_step_cv - coefficient of variation of the op's time per profiled step (null where steps are not known, and for a type that groups ops)
 * @property {number|null} baseline_alloc_bytes - bytes the op itself allocated over the run (not the ops it called), host and device memory together; null where the profile records no memory
 * @property {number|null} baseline_alloc_bytes_per_execution - alloc_bytes per call of the op on the host
 * @property {number|null} baseline_net_bytes - allocated minus freed by the op itself (PyTorch's self memory usage); null where frees are not attributed to ops (TensorFlow) or memory is not recorded
 * @property {number|null} target_occurrences - times the op ran in that run
 * @property {number|null} target_mean_us - self time per occurrence, µs
 * @property {number|null} target_total_us - self time summed over the run, µs
 * @property {number|null} target_share - total_us / all op time of that run
 * @property {'device'|'host'|'mixed'|null} target_time_source - `device` where the op launched kernels (its time is the kernels'), else `host`; `mixed` when a type groups both
 * @property {number|null} target_p10_us - 10th percentile of one occurrence's self time (null where occurrences are not told apart, as for kernels no host op launched, or for a type grouping ops)
 * @property {number|null} target_median_us - median of one occurrence's self time
 * @property {number|null} target_p90_us - 90th percentile of one occurrence's self time
 * @property {number|null} target_cv - coefficient of variation of one occurrence's self time (std / mean)
 * @property {boolean|null} target_noisy - 3 or more occurrences and a CV above 0.5: the mean hides a wide spread, so its speedup is unreliable
 * @property {number|null} target_kernels_per_execution - device kernels (memcpys, memsets) per occurrence where the time is device time; null for host time
 * @property {number|null} target_per_step_cv - coefficient of variation of the op's time per profiled step (null where steps are not known, and for a type that groups ops)
 * @property {number|null} target_alloc_bytes - bytes the op itself allocated over the run (not the ops it called), host and device memory together; null where the profile records no memory
 * @property {number|null} target_alloc_bytes_per_execution - alloc_bytes per call of the op on the host
 * @property {number|null} target_net_bytes - allocated minus freed by the op itself (PyTorch's self memory usage); null where frees are not attributed to ops (TensorFlow) or memory is not recorded
 */

/**
 * `sweeps`: every model's batch sizes per device, and the models that can be swept.
 * @typedef {Object} SweepsDocument
 * @property {Object<string, Object<string, Array<number>>>} models - model key -> device -> batch sizes
 * @property {Array<string>} sweepable - models with two or more batch sizes on one device, best first
 */

/**
 * `sweep`: how each op and the whole step scale with batch size, one line per series (device, precision or compiler), the other dimensions held.
 * @typedef {Object} SweepDocument
 * @property {string} model
 * @property {'name'|'type'} group_by
 * @property {'compiler'|'device'|'precision'} series_by - the dimension the lines are drawn by
 * @property {Object<string, string>} held - the other dimensions, each held at one value (device, precision, compiler)
 * @property {string} baseline_series - the series speedups and break-evens are against: CPU, fp32 or eager (a key of batch_sizes where the sweep has runs there)
 * @property {string|null} target_series - the series compared with it: the first other one (null where there is none)
 * @property {Object<string, Array<number>>} batch_sizes - series -> batch sizes
 * @property {Array<RunRecord>} runs - the swept model's runs
 * @property {Array<string>} top_ops - the ops plotted
 * @property {Array<SeriesPoint>} series
 * @property {Array<StepPoint>} steps
 * @property {Array<Fit>} fits
 * @property {Array<Breakeven>} breakeven
 * @property {Array<SpeedupPoint>} speedups
 * @property {Array<string>} warnings
 * @property {Object} [figures] - plotly figures by name (HTTP API only)
 */

/**
 * One op on one series (a device, precision or compiler) at one batch size; repeats pooled (each run weighs the same).
 * @typedef {Object} SeriesPoint
 * @property {string} op
 * @property {string} series - the series: the run's value of the dimension the lines are drawn by (`series_by`)
 * @property {number} batch_size
 * @property {number|null} mean_us
 * @property {number|null} per_sample_us - mean_us / batch size
 * @property {number|null} total_us
 * @property {number|null} share
 * @property {string} run - the runs pooled, comma-separated
 * @property {number} repeats - how many runs had the op
 * @property {number|null} low_us - lower end of the 95% interval of mean_us over the repeats pooled here (Student's t on the log means; null for one run)
 * @property {number|null} high_us - upper end of that interval
 */

/**
 * The whole step on one series at one batch size.
 * @typedef {Object} StepPoint
 * @property {string} series - the series: the run's value of the dimension the lines are drawn by (`series_by`)
 * @property {number} batch_size
 * @property {number|null} step_us
 * @property {number|null} samples_per_s
 * @property {string} basis - `step markers` (wall time of a step) or `op time per step`
 * @property {string} run
 * @property {number} repeats
 * @property {number|null} step_low_us - lower end of the 95% interval of step_us over the repeats (null for one run)
 * @property {number|null} step_high_us - upper end of that interval
 */

/**
 * Least squares of mean_us = fixed_us + per_sample_us × batch size, per op and series.
 * @typedef {Object} Fit
 * @property {string} op - op key, or `(whole step)`
 * @property {string} series - the series: the run's value of the dimension the lines are drawn by (`series_by`)
 * @property {number|null} fixed_us
 * @property {number|null} per_sample_us
 * @property {number|null} r2
 * @property {number} points
 * @property {boolean} poor_fit - R² < 0.9 over 3+ points and the line misses them by more than 5% (RMS)
 * @property {number|null} share - the op's mean share of its runs' op time
 * @property {number|null} breakeven_batch_size - the op's Breakeven batch size (null where it has none)
 * @property {'above'|'always'|'below'|'mixed'|'never'|null} target_faster - the op's Breakeven: where the target series is faster (null without fits on both); `mixed` where the measured speedups cross 1 more than once
 */

/**
 * Where an op's lines on the baseline and the target series cross.
 * @typedef {Object} Breakeven
 * @property {string} op
 * @property {number|null} batch_size - null when the lines do not cross at a batch size >= 1
 * @property {'above'|'always'|'below'|'mixed'|'never'} target_faster
 */

/**
 * Baseline series mean / target series mean at a batch size both ran.
 * @typedef {Object} SpeedupPoint
 * @property {string} op
 * @property {number} batch_size
 * @property {number|null} speedup
 */

/**
 * `tb-opcompare check`: did anything get significantly slower between two groups of runs?
 * @typedef {Object} CheckDocument
 * @property {boolean} passed - no gated op and not the whole step got significantly slower beyond the threshold
 * @property {number|null} common_change - how much slower (> 1) or faster (< 1) the target ran every op together, taken out of the ops' adjusted speedups; null where not measured
 * @property {string} headline - the verdict in one sentence
 * @property {Array<string>} baseline - the baseline runs, pooled
 * @property {Array<string>} target - the target runs, pooled
 * @property {number} threshold - the largest slowdown that does not fail the check (0.05: 5%)
 * @property {number} min_share - ops below this share of op time on both sides are not gated
 * @property {string|null} ops - the regular expression that selects the gated ops, if any
 * @property {string} group_by - `name` or `type`
 * @property {string} noise - how run-to-run noise entered the intervals, and whether each run's speed was taken out
 * @property {number} slower - tested ops significantly slower
 * @property {number} faster - tested ops significantly faster
 * @property {number} within_noise - tested ops whose change is within noise or the threshold
 * @property {number} not_tested - ops not tested: outside --ops / --min-share, or without an interval
 * @property {number} only_baseline - ops that ran in the baseline only (above --min-share and within --ops)
 * @property {number} only_target - ops that ran in the target only (above --min-share and within --ops): new work
 * @property {CheckRow} whole_step - the step as a stopwatch reads it (`whole_step_basis`), tested on its own
 * @property {'op time per step'|'step wall time'} whole_step_basis - what `whole_step` is: each run's median steady step wall time (the headline's rule) where every run has step markers, else all op time per profiled step
 * @property {boolean} enough_evidence - whether the runs could show a regression of twice the threshold (10% at least) in every gated op holding 5% of op time or more (`detectable_change` at most that); a check that passes without it says `not enough evidence` (exit 3 under `--strict`)
 * @property {number|null} detectable_change - the smallest slowdown (0.3: 30%) that this check would flag in 80% of checks in every gated op holding 5% of op time or more, else in every gated op (the largest of their rows' `detectable_change`); null where no gated op was tested on run-to-run noise
 * @property {string|null} detectable_key - the op whose noise sets `detectable_change`
 * @property {Array<string>} outlier_runs - runs whose whole step lies far from the rest of their side (a hiccup of the machine): left out of the whole step's test; their ops stay in, each on its typical time
 * @property {Array<CheckRow>} rows - the ops, slower first, then faster, then the rest, each by share of time
 * @property {Array<CheckStepPart>} step_parts - the step split by what it was spent on, each part's change (empty where a side's runs split no step)
 * @property {string|null} grew_most - the category of the host part whose time grew most: where a slower step's time went (its `grew` says whether beyond noise); the headline names it, with its interval, when the whole step is slower
 * @property {Array<string>} warnings - what may make the verdicts less reliable
 * @property {number} resamples - bootstrap replicates
 * @property {string|null} [baseline_logdir] - where the baseline runs were read, where that is not the target's logdir (`check --baseline-logdir`: a stored baseline, such as the main branch's runs in a bucket); null: the same logdir
 */

/**
 * One op (or the whole step) of a check: its speedup with its confidence interval and the verdict once the false discovery rate is controlled over the tested ops.
 * @typedef {Object} CheckRow
 * @property {string} key - op name (group_by=name), op type (group_by=type), or `(whole step)`: the step, as the document's `whole_step_basis` says
 * @property {'faster'|'not tested'|'only in baseline'|'only in target'|'slower'|'within noise'} verdict - `slower` / `faster`: beyond the threshold with the false discovery rate held at 1.5% (the whole step on its own at 1.5%); `within noise`: no significant change beyond the threshold; `only in baseline` / `only in target`: the op ran on one side only; `not tested`: outside --ops / --min-share (its interval is still given), or no interval could be made
 * @property {number|null} speedup - baseline mean / target mean per execution: geometric means of the runs' means
 * @property {number|null} adjusted_speedup - the speedup of the runs' typical times (each run's median over its executions, or for an op run twice a step the lower quartile of its steps' time per execution) with each run's speed factor taken out (the median over ops of how much faster or slower the run was than the average run): what the interval and verdict are about; the whole step's speed is not taken out
 * @property {number|null} speedup_low - lower end of the confidence interval of the adjusted speedup, at `interval_level`
 * @property {number|null} speedup_high - upper end of the confidence interval of the adjusted speedup
 * @property {number} interval_level - the interval's confidence: for a tested row the level its verdict was decided at (1 - 2 x the largest p-value its family flags, so the interval lies wholly beyond the threshold exactly when the row is flagged), 0.95 otherwise
 * @property {number|null} p_value - one-sided p-value, in the direction the estimate points, against a change of at most the threshold
 * @property {number|null} detectable_change - the smallest slowdown (0.3: 30%) that this row's test would flag in 80% of checks, given its run-to-run noise, runs and confidence; null without an interval from runs
 * @property {number|null} baseline_mean_us - mean time per execution in the baseline runs, µs
 * @property {number|null} target_mean_us - mean time per execution in the target runs, µs
 * @property {number} baseline_share - share of the baseline's op time
 * @property {number} target_share - share of the target's op time
 * @property {boolean} gated - whether a `slower` verdict here fails the check (within --ops and --min-share; the whole step always)
 * @property {boolean} significant - a gated row whose verdict is a change (slower, faster, only in one side): what the tab's "significant changes only" and `significant=1` on the compare routes keep
 */

/**
 * One part of the step in a check (issue 53): how its time changed between the sides.
 * @typedef {Object} CheckStepPart
 * @property {'device'|'host'} side - as in Compare's breakdown: `host` parts add up to the step wall time
 * @property {string} category - a key of the vocabulary every format shares (`input`, `forward`, `device_idle`, ...)
 * @property {string} label - the category in words, as shown
 * @property {number} baseline_us - mean over the baseline runs of the part's time in each run's median steady step, µs
 * @property {number} target_us - as baseline_us, for the target
 * @property {number} change_us - target_us - baseline_us (negative: time saved)
 * @property {number|null} low_us - lower end of the change's 95% interval (Welch's, over runs; outlier runs left out), µs; null without two runs a side
 * @property {number|null} high_us - upper end of that interval, µs
 * @property {boolean} grew - the part took longer: the interval lies wholly above 0, or with one run a side the change is
 */

/**
 * A model across many runs: the top ops and the whole step at each point of an order.
 * @typedef {Object} TrendDocument
 * @property {string} order_by - `recorded`, `label`, `run`, `repeat` or `sidecar:<dotted.path>`
 * @property {string} group_by
 * @property {Array<TrendPoint>} points - in order: natural order of the values (2.9 before 2.10)
 * @property {Array<string>} keys - the ops shown, largest share first, then `(whole step)`, then the parts of the step (`(step) waiting for input`, ...: each point's median steady step by what it was spent on, where its runs split their steps)
 * @property {Array<TrendRow>} rows - each key at each point
 * @property {'mixed'|'op time per step'|'step wall time'} whole_step_basis - what `(whole step)` is: the median steady step wall time of a point's runs pooled (the headline's rule) where every run has step markers, else all op time per step (the mean per run); `mixed` where points differ
 * @property {Array<string>} warnings
 * @property {string} order_note - how ties in the order were broken (runs that share a recording time, or have none, are each a point, ordered by run name); empty where none were
 */

/**
 * One point of a trend: the runs that share one value of the order.
 * @typedef {Object} TrendPoint
 * @property {string} value - the value of the order (a recording time, label, run name, version ...)
 * @property {Array<string>} runs - the runs pooled at this point
 */

/**
 * One op at one point of a trend.
 * @typedef {Object} TrendRow
 * @property {string} key - op name or type, or `(whole step)`: the step's wall time, as `whole_step_basis` says
 * @property {number} point - position of the point in `points`
 * @property {number|null} mean_us - geometric mean of the point's runs' means per execution, µs
 * @property {number|null} low_us - lower end of its 95% interval (Student's t on the log means; null for one run)
 * @property {number|null} high_us - upper end of its 95% interval
 * @property {number} runs - runs at this point that ran the op
 */

/**
 * Steady-state step latency and throughput of every model, precision, compiler and batch size (rows) on every device (columns), with the speedup against a reference device.
 * @typedef {Object} MatrixDocument
 * @property {string|null} reference - the reference column's key (default: CPU where present, else the first column)
 * @property {number|null} warmup - leading steps dropped from every run as asked; null: detected per run (steps slower than 1.5x the median of the steps after them)
 * @property {string|null} part - the part of the step each cell shows beside its step (`input`, `device_idle`, ...), as asked
 * @property {Array<MatrixColumn>} columns - CPU first, then the accelerators by name
 * @property {Array<MatrixRow>} rows - by model, then fp32 and eager first, then batch size
 * @property {Array<MatrixCell>} cells - the filled cells, row by row
 * @property {Array<string>} warnings
 */

/**
 * One column of the matrix: a device (`?` where unknown), with the accelerator's model where one kind of accelerator came in several (`GPU (NVIDIA H200)`).
 * @typedef {Object} MatrixColumn
 * @property {string} key - the device, as shown and as `reference` takes it
 * @property {string} device
 */

/**
 * One configuration of a model: the precision, compiler and batch size its runs share.
 * @typedef {Object} MatrixRow
 * @property {string} model
 * @property {string} precision
 * @property {string} compiler
 * @property {number|null} batch_size
 */

/**
 * The runs of one row (model, precision, compiler, batch size) on one device, and their steady-state step.
 * @typedef {Object} MatrixCell
 * @property {string} model - the model without its precision and compiler
 * @property {string} precision - the row's precision (fp32 where the runs do not say)
 * @property {string} compiler - the row's compiler (eager where the runs do not say)
 * @property {number|null} batch_size - samples per step
 * @property {string} column - the key of its MatrixColumn
 * @property {Array<string>} runs - the runs pooled here (repeats of one configuration)
 * @property {number} steps - steady steps pooled (after warm-up); 0 where the runs have no step markers
 * @property {number} warmup_steps - leading steps left out as warm-up, over all its runs
 * @property {number|null} latency_us - median wall time of a steady step, µs (step markers; the headline's rule); null without markers
 * @property {number|null} latency_std_us - standard deviation of the steady steps' wall time, µs
 * @property {number|null} latency_p10_us - 10th percentile of the steady steps' wall time, µs
 * @property {number|null} latency_p90_us - 90th percentile of the steady steps' wall time, µs
 * @property {number|null} throughput_per_s - samples per second: batch size x 10^6 / latency_us
 * @property {number|null} speedup - the reference cell's latency / this cell's, in the same row; null without both
 * @property {boolean} reference - whether this is the reference cell of its row: the one in the reference column
 * @property {number|null} part_us - with `part`: that part's time in the cell's median steady step (Compare's breakdown), µs; 0 where the step has none of it; null where its runs split no step (or, for a device part, have no device)
 * @property {number|null} part_speedup - the reference cell's part_us / this cell's; null without both
 */

/**
 * Two runs' module trees side by side: model -> module -> op (PyTorch nn.Module calls, recorded with with_stack=True; else TF name scopes).
 * @typedef {Object} ModulesDocument
 * @property {string} baseline
 * @property {string} target
 * @property {boolean} per_step - whether times are per profiled step (both runs know their step count)
 * @property {string} source - where modules come from: `nn.Module calls`, `name scopes`, or `mixed` (one run each)
 * @property {HeadlineFigure} headline - the two runs' speedup, as Compare's headline
 * @property {Array<ModuleNode>} nodes - depth first from the root, the larger child first
 * @property {Array<string>} notes
 */

/**
 * The speedup a user reads first, as Compare's summary gives it (`headline_*`): the same number in every view of the same two runs.
 * @typedef {Object} HeadlineFigure
 * @property {number|null} speedup - baseline over target median steady step wall time, per sample where the batch sizes differ; op time per step where a side has no step markers (see basis)
 * @property {'op time'|'op time per step'|'step wall time'} basis - what speedup is the ratio of
 * @property {boolean} per_sample - speedup compares time per sample (the batch sizes differ)
 * @property {string} text - the basis in words, with the two times it is the ratio of
 * @property {number|null} baseline_step_wall_us - median steady step wall time, µs; null without step markers
 * @property {number|null} target_step_wall_us - as baseline_step_wall_us, for the target
 */

/**
 * A node of the module tree: the whole model, a module (its sub-modules included), or an op inside a module.
 * @typedef {Object} ModuleNode
 * @property {string} id - the node's path: modules `/`-joined, an op's name after its module's path; the root is empty
 * @property {string|null} parent - the parent's id; null for the root
 * @property {string} name - the last part of the path: a module instance (`Conv2d_0`), a TF scope, or an op
 * @property {string} kind - `module` or `op`
 * @property {number} depth - 0 for the root
 * @property {number|null} baseline_us - time inside the node on the baseline, per profiled step where both runs know their steps, else in all; null where only the target has it
 * @property {number|null} target_us - as baseline_us, on the target
 * @property {number|null} baseline_share - of the baseline's whole model
 * @property {number|null} target_share - of the target's whole model
 * @property {number|null} speedup - baseline_us / target_us
 * @property {number|null} baseline_alloc_bytes - bytes the ops inside the node allocated on the baseline, per step or in all as baseline_us; null where the run records no memory
 * @property {number|null} target_alloc_bytes - as baseline_alloc_bytes, on the target
 * @property {string} status - `matched`, `baseline_only` or `target_only`
 */

/**
 * Two runs' layers side by side: how much of a step is application, framework, runtime and device, and the application's and runtime's rows.
 * @typedef {Object} LayersDocument
 * @property {string} baseline
 * @property {string} target
 * @property {boolean} per_step - whether times are per profiled step (both runs know their step count)
 * @property {HeadlineFigure} headline - the two runs' speedup, as Compare's headline
 * @property {Array<LayerTotal>} layers - application, framework, runtime, device: those either run records
 * @property {Array<LayerRow>} rows - application rows, then runtime rows, the larger first
 * @property {Array<string>} notes
 */

/**
 * One layer's time in both runs.
 * @typedef {Object} LayerTotal
 * @property {'application'|'device'|'framework'|'runtime'} layer - application: user ranges (record_function, TF Trace, app_stats) and the tf.data input pipeline; framework: ops; runtime: CUDA/HIP runtime and driver calls; device: kernels, memcpys, memsets
 * @property {string} basis - how the time is measured: `self` (host time in the layer's own work, nested work of other layers left out), `wall` (ranges with wall time only, the ops inside them included), `kernel` (summed device time)
 * @property {number|null} baseline_us - per profiled step where both runs know their steps, else in all; null where the baseline records nothing of the layer
 * @property {number|null} target_us - as baseline_us, on the target
 * @property {number|null} baseline_share - of the baseline's step wall time (several host threads can pass 100%); null where the step time is unknown
 * @property {number|null} target_share - as baseline_share, on the target
 * @property {number|null} speedup - baseline_us / target_us
 */

/**
 * An application range or runtime call, compared like an op: wall time, not mixed into op self time.
 * @typedef {Object} LayerRow
 * @property {'application'|'runtime'} layer - the layer the row belongs to
 * @property {string} name - the range's or call's name (`Optimizer.step#Adam.step`, `cudaLaunchKernel`)
 * @property {string} kind - what recorded it: a trace category (`user_annotation`, `cuda_runtime`, `cuda_driver`), `Dataset` (a tf.data iterator) or `app_stats`
 * @property {number|null} baseline_calls - times it ran in the baseline (all profiled steps); null where only the target has it
 * @property {number|null} baseline_wall_us - its summed wall time, per step or in all as the layers
 * @property {number|null} baseline_self_us - its wall time less the ops and calls inside it; null where not known
 * @property {number|null} baseline_mean_us - wall time per call
 * @property {number|null} target_calls - as baseline_calls, on the target
 * @property {number|null} target_wall_us - as baseline_wall_us, on the target
 * @property {number|null} target_self_us - as baseline_self_us, on the target
 * @property {number|null} target_mean_us - as baseline_mean_us, on the target
 * @property {number|null} speedup - baseline_mean_us / target_mean_us
 * @property {'baseline_only'|'matched'|'target_only'} status
 */

/**
 * Two runs' memory side by side: peaks per device, memory over time, and what each op allocated.
 * @typedef {Object} MemoryDocument
 * @property {MemoryRun} baseline
 * @property {MemoryRun} target
 * @property {Array<MemorySeries>} series - memory over time: the baseline's devices, then the target's, each by name
 * @property {Array<string>} columns - the fields of a row, in order
 * @property {Array<MemoryRow>} rows - the ops that allocated or freed memory, the largest allocation (either run's) first
 * @property {Array<string>} notes - what the user should know: a run that records no memory and how to record it, what TensorFlow leaves out
 */

/**
 * What one run records of memory, over its whole profile.
 * @typedef {Object} MemoryRun
 * @property {string} run
 * @property {string|null} framework - TensorFlow or PyTorch, where the data says
 * @property {string} format - the profile's format (as RunRecord's)
 * @property {boolean} recorded - whether the profile records memory at all: allocations per op, memory in use, or both
 * @property {Object<string, number>} peak_memory_bytes - memory in use at its highest per device (PyTorch: `CPU`, `GPU:0`; TensorFlow: its allocators, `mklcpu`, `GPU_0_bfc`); empty where not recorded
 * @property {number|null} steps - profiled steps, where known
 * @property {number|null} memory_events - allocations and frees recorded (PyTorch `[memory]` events; TensorFlow MemoryAllocation and MemoryDeallocation events); null where none
 * @property {number|null} memory_events_per_step - memory_events per profiled step
 * @property {number|null} allocated_bytes - bytes the ops allocated over the profile, each op's own allocations summed; null where the profile records no allocation per op
 * @property {number|null} allocated_bytes_per_step - allocated_bytes per profiled step
 */

/**
 * One run's memory in use over time on one device, as plotted (at most 2,000 points, each the highest of the stretch of time it stands for, so its highest point is the peak).
 * @typedef {Object} MemorySeries
 * @property {'baseline'|'target'} side - the run it is of
 * @property {string} device - a key of that run's peak_memory_bytes
 * @property {number} peak_bytes - the highest bytes_in_use: that run's peak_memory_bytes on the device
 * @property {Array<number>} time_us - since the run's first memory sample (any device), µs
 * @property {Array<number>} bytes_in_use - bytes the allocator held then
 */

/**
 * One op that allocated or freed memory in either run: the memory columns of the comparison by op name.
 * @typedef {Object} MemoryRow
 * @property {string} key - op name
 * @property {string|null} op_type - normalised op type
 * @property {'baseline_only'|'matched'|'target_only'} status - whether the op is in both runs or in one only
 * @property {number|null} baseline_occurrences - times the op ran in that run
 * @property {number|null} baseline_alloc_bytes - bytes the op itself allocated over the run (not the ops it called), host and device memory together; null where the profile records no memory
 * @property {number|null} baseline_alloc_bytes_per_execution - alloc_bytes per call of the op on the host
 * @property {number|null} baseline_net_bytes - allocated minus freed by the op itself (PyTorch's self memory usage); null where frees are not attributed to ops (TensorFlow) or memory is not recorded
 * @property {number|null} target_occurrences - times the op ran in that run
 * @property {number|null} target_alloc_bytes - bytes the op itself allocated over the run (not the ops it called), host and device memory together; null where the profile records no memory
 * @property {number|null} target_alloc_bytes_per_execution - alloc_bytes per call of the op on the host
 * @property {number|null} target_net_bytes - allocated minus freed by the op itself (PyTorch's self memory usage); null where frees are not attributed to ops (TensorFlow) or memory is not recorded
 * @property {number|null} ratio - target_alloc_bytes_per_execution / baseline_alloc_bytes_per_execution (> 1: the target allocates more per call); null where the baseline allocates nothing
 */

/**
 * Why an op sped up: each op's work, achieved rate and its device's roof on both sides.
 * @typedef {Object} RooflineDocument
 * @property {RooflineRun} baseline
 * @property {RooflineRun} target
 * @property {Array<string>} columns - the fields of a row, in order
 * @property {Array<RooflineRow>} rows - the ops, the most time (either side's share) first
 * @property {Array<string>} notes - what the user should know: unknown work or limits and how to give them, suspect ops
 */

/**
 * One run of a roofline: its roofs, and its achieved rate over the ops whose work is known.
 * @typedef {Object} RooflineRun
 * @property {string} run
 * @property {string|null} device_name - the accelerator the profile names
 * @property {string|null} precision - the precision the run computed in (as RunRecord's)
 * @property {Array<RooflineLimits>} limits - its roofs: the device's (where it has one), then the host's
 * @property {number|null} flops - FLOPs of the ops whose work and time are known, summed
 * @property {number|null} time_us - their time, µs (kernel time where timed on the device)
 * @property {number|null} flops_per_s - flops / time: the run's achieved rate on those ops
 */

/**
 * One processor's roof as a run's ops were measured against it (issue 54).
 * @typedef {Object} RooflineLimits
 * @property {'device'|'host'} processor - the accelerator (ops timed by their kernels) or the CPU (ops timed on the host)
 * @property {string|null} device - what the limits are of: a model, the profile's description; null where unknown
 * @property {string|null} precision - the precision whose peak is the compute roof (the run's; of a mix, the highest peak)
 * @property {number|null} peak_flops - peak FLOP/s at that precision; null where unknown
 * @property {Object<string, number>} peak_flops_by_precision - every peak known, FLOP/s, by precision
 * @property {number|null} memory_bandwidth - peak memory bandwidth, bytes/s; null where unknown
 * @property {string|null} source - where the figures come from: the sidecar, the profile, or a vendor datasheet's URL
 */

/**
 * One op whose work either run knows or could know, on both runs' rooflines.
 * @typedef {Object} RooflineRow
 * @property {string} op_name - op name (the outermost op with a formula: `aten::conv2d`, not the convolution it calls)
 * @property {number|null} baseline_calls - the op's calls counted (a call inside another counted call left out)
 * @property {number|null} baseline_known_calls - those whose work is known and that ran where the op is timed (the figures below are theirs)
 * @property {string|null} baseline_source - where the work comes from: `profile`, `shapes` (formulas on the recorded input shapes), `xla` (XLA's cost rules on the compiled program the profile carries) or `unknown: why`
 * @property {string|null} baseline_timed_on - `device`: by the kernels its calls launched; `host`: by their wall time
 * @property {number|null} baseline_time_us - the known calls' time there, µs
 * @property {number|null} baseline_share - time_us / the time of all ops of the run with known work
 * @property {number|null} baseline_flops - floating-point operations of the known calls
 * @property {number|null} baseline_bytes - bytes they must at least move (inputs read and output written once)
 * @property {number|null} baseline_flops_per_s - achieved FLOP/s
 * @property {number|null} baseline_bytes_per_s - achieved bytes/s
 * @property {number|null} baseline_intensity - arithmetic intensity, FLOPs per byte
 * @property {number|null} baseline_roof_flops_per_s - the roof at that intensity: min(peak FLOP/s, intensity x bandwidth)
 * @property {string|null} baseline_roof_precision - the precision whose peak is that roof: the run's (its limits' `precision`), or `tf32` for an fp32 op whose kernels ran on TF32 tensor cores (their names say so); null where the roof is unknown
 * @property {number|null} baseline_fraction_of_roof - flops_per_s / roof (a copy's: bytes_per_s / bandwidth); null where suspect
 * @property {string|null} baseline_bound - `compute` where the intensity reaches the ridge (peak / bandwidth), else `memory`
 * @property {number|null} baseline_time_at_roof_us - the time at the roof: max(flops / peak, bytes / bandwidth), µs
 * @property {number|null} baseline_headroom_us - time_us - time_at_roof_us: what the roof leaves to gain
 * @property {string|null} baseline_suspect - why an achieved rate above a peak cannot be (the op is then not placed on the roof)
 * @property {number|null} target_calls - the op's calls counted (a call inside another counted call left out)
 * @property {number|null} target_known_calls - those whose work is known and that ran where the op is timed (the figures below are theirs)
 * @property {string|null} target_source - where the work comes from: `profile`, `shapes` (formulas on the recorded input shapes), `xla` (XLA's cost rules on the compiled program the profile carries) or `unknown: why`
 * @property {string|null} target_timed_on - `device`: by the kernels its calls launched; `host`: by their wall time
 * @property {number|null} target_time_us - the known calls' time there, µs
 * @property {number|null} target_share - time_us / the time of all ops of the run with known work
 * @property {number|null} target_flops - floating-point operations of the known calls
 * @property {number|null} target_bytes - bytes they must at least move (inputs read and output written once)
 * @property {number|null} target_flops_per_s - achieved FLOP/s
 * @property {number|null} target_bytes_per_s - achieved bytes/s
 * @property {number|null} target_intensity - arithmetic intensity, FLOPs per byte
 * @property {number|null} target_roof_flops_per_s - the roof at that intensity: min(peak FLOP/s, intensity x bandwidth)
 * @property {string|null} target_roof_precision - the precision whose peak is that roof: the run's (its limits' `precision`), or `tf32` for an fp32 op whose kernels ran on TF32 tensor cores (their names say so); null where the roof is unknown
 * @property {number|null} target_fraction_of_roof - flops_per_s / roof (a copy's: bytes_per_s / bandwidth); null where suspect
 * @property {string|null} target_bound - `compute` where the intensity reaches the ridge (peak / bandwidth), else `memory`
 * @property {number|null} target_time_at_roof_us - the time at the roof: max(flops / peak, bytes / bandwidth), µs
 * @property {number|null} target_headroom_us - time_us - time_at_roof_us: what the roof leaves to gain
 * @property {string|null} target_suspect - why an achieved rate above a peak cannot be (the op is then not placed on the roof)
 * @property {number|null} speedup - the baseline's time per known call / the target's
 * @property {number|null} work_ratio - the target's FLOPs per known call / the baseline's: 1 where both calls did the same work; else the speedup compares different work (another batch size, or a compiler that took some of the op's calls into its own kernels)
 * @property {string|null} change - what the change did: `moved along the roof` (about the same fraction of its roof on both sides, within 1.25x), `closed the gap` (nearer its roof) or `widened the gap`
 */

/**
 * The body of every error answer.
 * @typedef {Object} ErrorDocument
 * @property {Error} error
 */

/**
 * What went wrong: 400 a bad parameter, 404 an unknown run or session, 422 an unreadable profile, 500 a bug (see the TensorBoard log).
 * @typedef {Object} Error
 * @property {number} status
 * @property {string} message
 * @property {Array<string>} [known] - 404: the names that exist
 * @property {string} [path] - 422: the file that cannot be read
 * @property {string} [reason] - 422: what is wrong with it
 * @property {string} [parameter] - 400: the parameter at fault, where one is
 */

// Words the server spells, for the tab to use as they are.
export const READ_FROM = Object.freeze({"profile": "the profile"});
export const LAYERS = Object.freeze(["application", "framework", "runtime", "device"]);
export const ROW_LAYERS = Object.freeze(["application", "runtime"]);
export const TREND_ORDERS = Object.freeze(["recorded", "label", "run", "repeat", "device", "batch_size", "precision", "compiler"]);
export const SERIES_DIMENSIONS = Object.freeze(["device", "precision", "compiler"]);
export const STEP_PARTS = Object.freeze({"input": "waiting for input", "forward": "host compute: forward and other", "backward": "host compute: backward", "optimizer": "host compute: optimizer", "copy": "copies between host and device", "device_wait": "waiting on the device", "launch": "kernel launches and other runtime calls", "communication": "communication", "untracked": "untracked: Python, gaps between events", "device_compute": "device busy: compute", "device_copy": "device busy: copies and memsets", "device_communication": "device busy: communication", "device_idle": "device idle"});
export const PLOT_TOP = Object.freeze({"default": 10, "max": 50});
export const COMPARE_PAGE = Object.freeze({"rows": 20000});
