/**
 * Streaming sample-rate conversion between the rates telephony and the realtime models use
 * (8, 16, 24 and 48 kHz): a rational L/M polyphase FIR whose prototype is a Kaiser-windowed sinc.
 * Each phase is normalized to unit DC gain, so a passband tone keeps its amplitude; the cutoff
 * sits below the lower Nyquist frequency, so tones the target rate cannot carry are removed
 * instead of folding back as aliases. Output is rounded and saturated to 16 bits, never wrapped.
 */

export type AudioSampleRate = 8000 | 16000 | 24000 | 48000;

export interface ResamplerOptions {
  readonly fromRate: AudioSampleRate;
  readonly toRate: AudioSampleRate;
}

/**
 * Zero crossings of the sinc on each side of the centre. More gives a narrower transition band
 * at a linear cost; 16 keeps 8 kHz telephony flat to about 3 kHz and costs ~35k multiply-adds
 * per 20 ms frame in the worst direction (48 -> 8 kHz).
 */
const ZERO_CROSSINGS = 16;
/** Cutoff as a fraction of the lower Nyquist frequency; the transition band straddles it. */
const CUTOFF_FRACTION = 0.9;
/** Kaiser β for about 80 dB of stopband attenuation, below the 16-bit noise floor of speech. */
const KAISER_BETA = 8;

export class Resampler {
  readonly fromRate: AudioSampleRate;
  readonly toRate: AudioSampleRate;
  /** Delay the filter adds, in input samples: output needs this many samples of look-ahead. */
  readonly latencySamples: number;
  private readonly up: number;
  private readonly down: number;
  private readonly taps: number;
  private readonly coefficients: Float32Array;
  private pending: Float32Array;
  private pendingLength: number;
  /** Index in `pending` of the input sample the next output is centred on (plus `phase`/up). */
  private position: number;
  private phase = 0;

  constructor(options: ResamplerOptions) {
    this.fromRate = options.fromRate;
    this.toRate = options.toRate;
    const divisor = gcd(options.fromRate, options.toRate);
    this.up = options.toRate / divisor;
    this.down = options.fromRate / divisor;
    // Cutoff in cycles per input sample.
    const cutoff =
      (CUTOFF_FRACTION * 0.5 * Math.min(options.fromRate, options.toRate)) / options.fromRate;
    const half = Math.ceil(ZERO_CROSSINGS / (2 * cutoff));
    this.latencySamples = half;
    this.taps = 2 * half;
    this.coefficients =
      this.up === 1 && this.down === 1
        ? new Float32Array(0)
        : cachedDesign(this.up, this.down, half, cutoff);
    // A passthrough never buffers; others start with room for a 20 ms frame at 48 kHz.
    this.pending = new Float32Array(this.passthrough ? 0 : this.taps + 1024);
    // The filter looks back half-1 samples before the first input: start with that much silence.
    this.pendingLength = half - 1;
    this.position = half - 1;
  }

  get passthrough(): boolean {
    return this.up === 1 && this.down === 1;
  }

  /** Converts the next chunk of a continuous stream; output lags input by `latencySamples`. */
  process(input: Int16Array): Int16Array {
    if (this.passthrough) return input;
    this.append(input);
    const half = this.taps / 2;
    // An upper bound on the outputs this chunk completes.
    const capacity = Math.max(
      0,
      Math.ceil(((this.pendingLength - half - this.position) * this.up) / this.down) + 1,
    );
    const out = new Int16Array(capacity);
    let count = 0;
    const pending = this.pending;
    const coefficients = this.coefficients;
    const taps = this.taps;
    while (this.position + half < this.pendingLength) {
      const base = this.phase * taps;
      const start = this.position - half + 1;
      let sum = 0;
      for (let k = 0; k < taps; k++)
        sum += (pending[start + k] as number) * (coefficients[base + k] as number);
      const rounded = Math.round(sum);
      out[count++] = rounded > 32767 ? 32767 : rounded < -32768 ? -32768 : rounded;
      this.phase += this.down;
      while (this.phase >= this.up) {
        this.phase -= this.up;
        this.position++;
      }
    }
    this.discardConsumed();
    return count === capacity ? out : out.subarray(0, count);
  }

  /**
   * Ends the stream: returns the output still held back by the filter's delay (the last
   * `latencySamples` of input, run out against silence), then starts afresh as reset() does.
   */
  drain(): Int16Array {
    if (this.passthrough) return new Int16Array(0);
    const tail = this.process(new Int16Array(this.latencySamples));
    this.reset();
    return tail;
  }

  /** Forgets the stream so far (a new talk spurt after a discontinuity). */
  reset(): void {
    const half = this.taps / 2;
    this.pending.fill(0, 0, half - 1);
    this.pendingLength = half - 1;
    this.position = half - 1;
    this.phase = 0;
  }

  private append(input: Int16Array): void {
    const needed = this.pendingLength + input.length;
    if (needed > this.pending.length) {
      const grown = new Float32Array(Math.max(needed, this.pending.length * 2));
      grown.set(this.pending.subarray(0, this.pendingLength));
      this.pending = grown;
    }
    for (let i = 0; i < input.length; i++)
      this.pending[this.pendingLength + i] = input[i] as number;
    this.pendingLength = needed;
  }

  private discardConsumed(): void {
    const keepFrom = this.position - this.taps / 2 + 1;
    if (keepFrom <= 0) return;
    this.pending.copyWithin(0, keepFrom, this.pendingLength);
    this.pendingLength -= keepFrom;
    this.position -= keepFrom;
  }
}

/** Designs are shared: every call converting between the same two rates uses the same filter. */
const designs = new Map<string, Float32Array>();

function cachedDesign(up: number, down: number, half: number, cutoff: number): Float32Array {
  const key = `${up}/${down}`;
  let design = designs.get(key);
  if (!design) {
    design = designPhases(up, half, cutoff);
    designs.set(key, design);
  }
  return design;
}

/**
 * Coefficients for each of `phases` fractional offsets p/phases: tap k weighs the input sample at
 * distance (k - half + 1) - p/phases from the output instant.
 */
function designPhases(phases: number, half: number, cutoff: number): Float32Array {
  const taps = 2 * half;
  const out = new Float32Array(phases * taps);
  const windowNorm = besselI0(KAISER_BETA);
  for (let p = 0; p < phases; p++) {
    const fraction = p / phases;
    let sum = 0;
    const row = new Float64Array(taps);
    for (let k = 0; k < taps; k++) {
      const distance = k - half + 1 - fraction;
      const ratio = distance / half;
      const window =
        Math.abs(ratio) >= 1
          ? 0
          : besselI0(KAISER_BETA * Math.sqrt(1 - ratio * ratio)) / windowNorm;
      const value = 2 * cutoff * sinc(2 * cutoff * distance) * window;
      row[k] = value;
      sum += value;
    }
    for (let k = 0; k < taps; k++) out[p * taps + k] = (row[k] as number) / sum;
  }
  return out;
}

function sinc(x: number): number {
  if (x === 0) return 1;
  const px = Math.PI * x;
  return Math.sin(px) / px;
}

/** Modified Bessel function of the first kind, order 0 (series; converges fast for β ≤ 20). */
function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  const quarter = (x * x) / 4;
  for (let k = 1; k < 50; k++) {
    term *= quarter / (k * k);
    sum += term;
    if (term < sum * 1e-12) break;
  }
  return sum;
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}
