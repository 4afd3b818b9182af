// Deterministic test rows beyond shared/vectors: the inputs behind test/assembly/fixtures/llamacpp-digests.json.
// Only +, -, *, /, sqrt and float32 stores are used (no Math.log/exp/cos), so every JS engine produces the
// same bits and the stored digests stay valid wherever the tests run.

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s >>> 8) / 16777216;
  };
}

function pow2(n: number): number {
  let v = 1;
  for (let i = 0; i < n; i++) v *= 2;
  for (let i = 0; i > n; i--) v /= 2;
  return v;
}

/** Non-linear grid of IQ4_NL / IQ4_XS (midpoints between its entries make exact ties). */
const KV = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

export const VARIED_KINDS = [
  'gauss', 'student_t3', 'sparse90', 'mostly_pos', 'exp16_pm20', 'integer', 'blockexp_60', 'superexp_60',
  'const_pos', 'const_neg', 'block_consts', 'tie_q8', 'tie_q4', 'tie_iq4', 'tie_q5', 'outliers',
  'logscale_signed', 'tiny_1e-20', 'fp16_subnormal', 'fp32_denormal', 'ternary', 'all_neg', 'half_zero_blocks',
  'ramp', 'big_7e4', 'sign_ties', 'two_valued', 'huge_1e30',
] as const;

export const VARIED_ROW_LENGTH = 1024;

export interface VariedRows {
  rows: Float32Array; // VARIED_KINDS.length x VARIED_ROW_LENGTH
  /** Importance vectors: log-normal-like, the same with 20% zeros, and with zeroed columns 64..95 and 512..767. */
  imatrix: { lognormal: Float32Array; zeros20: Float32Array; zeroRanges: Float32Array };
}

export function variedRows(): VariedRows {
  const u = lcg(2024);
  // Irwin-Hall(4), scaled to unit variance: bell-shaped, bounded by +-3.46.
  const gauss = () => (u() + u() + u() + u() - 2) * 1.7320508075688772;
  const RL = VARIED_ROW_LENGTH;
  const rows = new Float32Array(VARIED_KINDS.length * RL);
  VARIED_KINDS.forEach((kind, r) => {
    for (let i = 0; i < RL; i++) {
      const g = gauss();
      const j = i % 32;
      const b = i >> 5;
      let v: number;
      switch (kind) {
        case 'gauss': v = 0.02 * g; break;
        case 'student_t3': { const a = gauss(), c = gauss(), d = gauss(); v = 0.02 * g / Math.sqrt((a * a + c * c + d * d) / 3 + 1e-3); break; }
        case 'sparse90': v = u() < 0.9 ? 0 : g; break;
        case 'mostly_pos': v = u() < 0.05 ? -0.3 * u() : 0.2 + u(); break;
        case 'exp16_pm20': v = g * pow2(((i >> 4) % 41) - 20); break;
        case 'integer': v = Math.round(g * 6); break;
        case 'blockexp_60': v = g * pow2(-((b * 7) % 61)); break;
        case 'superexp_60': v = g * pow2(-(((i >> 8) * 20) % 61)); break;
        case 'const_pos': v = 0.3; break;
        case 'const_neg': v = -1.75; break;
        case 'block_consts': v = [0, 0.5, -2, 1e-3, 3.25, -0.0078125, 7, -100][b % 8]; break;
        case 'tie_q8': v = j === 0 ? 127 : (j - 16) + 0.5; if (b & 1) v = -v; break;
        case 'tie_q4': v = j === 0 ? -8 : ((j % 16) - 8) + 0.5; if (b & 1) v = -v; break;
        case 'tie_iq4': { const k = j % 15; v = j === 0 ? -127 : (KV[k] + KV[k + 1]) / 2; if (b & 1) v = -v; v *= pow2((b % 5) - 2); break; }
        case 'tie_q5': v = j === 0 ? -16 : (j - 16) + 0.5; if (b & 1) v = -v; break;
        case 'outliers': v = u() < 0.02 ? 40 * g : 0.05 * g; break;
        case 'logscale_signed': v = (g < 0 ? -1 : 1) * pow2(Math.round(4 * gauss())) * (1 + u()); break;
        case 'tiny_1e-20': v = g * 1e-20; break;
        case 'fp16_subnormal': v = 1e-5 * (2 * u() - 1); break;
        case 'fp32_denormal': v = 1e-39 * (2 * u() - 1); break;
        case 'ternary': v = (i % 3) - 1; break;
        case 'all_neg': v = -u(); break;
        case 'half_zero_blocks': v = b % 2 ? 0 : 0.1 * g; break;
        case 'ramp': v = i / RL - 0.5; break;
        case 'big_7e4': v = 7e4 * g; break;
        case 'sign_ties': v = (i % 2 ? 1 : -1) * 0.5 * (1 + (b % 3)); break;
        case 'two_valued': v = u() < 0.5 ? 0 : 1; break;
        case 'huge_1e30': v = 1e30 * g; break;
        default: throw new Error(`unknown row kind ${kind}`);
      }
      rows[r * RL + i] = v;
    }
  });
  const lognormal = () => pow2(Math.round(3 * gauss())) * (1 + u());
  const ln = new Float32Array(RL);
  const z20 = new Float32Array(RL);
  const zr = new Float32Array(RL);
  for (let i = 0; i < RL; i++) ln[i] = lognormal();
  for (let i = 0; i < RL; i++) z20[i] = u() < 0.2 ? 0 : lognormal();
  for (let i = 0; i < RL; i++) zr[i] = (i >= 64 && i < 96) || (i >= 512 && i < 768) ? 0 : lognormal();
  return { rows, imatrix: { lognormal: ln, zeros20: z20, zeroRanges: zr } };
}

/**
 * Finite fp32 values for the F16/BF16 conversions, 256 per row: a sweep over the bit patterns
 * (stride 4099), every fp16 value with the fp32 midpoint to its successor and the midpoint +-1 ulp
 * (both signs), and a few named cases (overflow boundary 65520, fp16/fp32 subnormals, FLT_MAX).
 */
export function halfSpecials(): Float32Array {
  const out: number[] = [];
  const f = new Float32Array(1);
  const bits = new Uint32Array(f.buffer);
  const push = (b: number) => {
    bits[0] = b >>> 0;
    if (Number.isFinite(f[0])) out.push(f[0]);
  };
  for (let x = 0; x < 2 ** 32; x += 4099) push(x);
  for (let h = 0; h < 0x7c00; h++) {
    const e = h >> 10, m = h & 1023;
    const val = e === 0 ? m * pow2(-24) : (1 + m / 1024) * pow2(e - 15);
    const next = e === 0 ? (m + 1) * pow2(-24) : (1 + (m + 1) / 1024) * pow2(e - 15);
    f[0] = (val + next) / 2;
    const mid = bits[0];
    f[0] = val;
    const exact = bits[0];
    for (const s of [0, 0x80000000]) {
      push(s | mid);
      push(s | (mid + 1));
      push(s | (mid - 1));
      push(s | exact);
    }
  }
  out.push(0, -0, 65504, 65519.99, 65520, -65520, 3.4028234663852886e38, -3.4028234663852886e38, 1e-45, -1e-45,
    1.1754943508222875e-38, 5.960464477539063e-8, 2.9802322387695312e-8, 2.980232594e-8);
  while (out.length % 256) out.push(0);
  return new Float32Array(out);
}
