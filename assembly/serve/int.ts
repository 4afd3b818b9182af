// Serving matvec for the integer formats: symmetric intsym/int8/int4 (scale per group, row or
// tensor) and affine (f16 scale and bias per group; mlx's bf16, f16 or f32). Layouts and bit
// order: assembly/int/sym.ts, affine.ts, pack.ts. Codes are unpacked 256 at a time (pack.ts, vectorised for 4 and 8 bits) into
// i32s and dotted with x in f32; the scale multiplies each run's sum once, and affine adds
// bias * (sum of x over the group).
import { A_AUX, A_BIASES, A_BITS, A_FLAGS, A_GROUP, A_SCALES, A_SCRATCH, FLAG_PER_CHANNEL, FLAG_PER_TENSOR, argI32, argU32, storedScale } from '../common';
import { unpack8, unpackCodes, unpackTable } from '../int/pack';
import { hsum, mac16, rowAddScalar, rowBegin, rowEnd, sums16, xSums16 } from './common';
import { dotS4, dotS8, dotU4, dotU8, evenOddX, nibS, nibU, transposeX16 } from './simd';
import { dotF, put4, putS8, putU8 } from './gguf-batch';

const SLICE: i32 = 256;
const I32BUF = memory.data(SLICE * 4, 16);

// Sum of n i32 codes times x (SIMD: 4 lanes then a fixed-order reduction; scalar: left to right).
function dotI32(c: usize, x: usize, n: i32): f32 {
  let i = 0;
  let s: f32 = 0;
  if (ASC_FEATURE_SIMD) {
    let a = f32x4.splat(0);
    for (; i + 4 <= n; i += 4) {
      a = f32x4.add(a, f32x4.mul(f32x4.convert_i32x4_s(v128.load(c + (<usize>i << 2))), v128.load(x + (<usize>i << 2))));
    }
    s = hsum(a);
  }
  for (; i < n; i++) s += <f32>load<i32>(c + (<usize>i << 2)) * load<f32>(x + (<usize>i << 2));
  return s;
}

// SIMD, 4-bit codes, run a multiple of 32: 16 bytes hold 32 codes (code 2j in the low nibble of
// byte j, 2j+1 in the high nibble); nibbles are sign- or zero-extended to bytes and interleaved
// back into element order, then dotted 16 at a time (no i32 round trip through memory).
@inline function dotRun4(q: usize, run: i32, signed: bool, x: usize): f32 {
  let a = f32x4.splat(0);
  for (let i = 0; i < run; i += 32) {
    const b = v128.load(q + (<usize>i >> 1));
    const lo = signed ? i8x16.shr_s(i8x16.shl(b, 4), 4) : v128.and(b, i8x16.splat(15));
    const hi = signed ? i8x16.shr_s(b, 4) : i8x16.shr_u(b, 4);
    const c0 = i8x16.shuffle(lo, hi, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const c1 = i8x16.shuffle(lo, hi, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    a = f32x4.add(a, f32x4.add(mac16(c0, x + (<usize>i << 2)), mac16(c1, x + (<usize>i << 2) + 64)));
  }
  return hsum(a);
}

// Codes of `run` values starting at stream bit 0 of q, dotted with x.
function dotRun(q: usize, run: i32, bits: i32, signed: bool, x: usize): f32 {
  if (ASC_FEATURE_SIMD) {
    if (bits == 4 && (run & 31) == 0) return dotRun4(q, run, signed, x);
  }
  let t: f32 = 0;
  for (let i = 0; i < run; i += SLICE) {
    const m = min(SLICE, run - i);
    unpackCodes(q + ((<usize>i * <usize>bits) >> 3), m, bits, signed, I32BUF);
    t += dotI32(I32BUF, x + (<usize>i << 2), m);
  }
  return t;
}

// ---- SIMD fast path: runs of a multiple of 32 (4 bits), 16 (8 bits) or 8 (2, 3, 5, 6, 7) -------
// Codes go from bytes to f32 lanes by shifts (simd.ts), dotted with x reordered once per call:
// transposed per 16 for 8 bits, split even / odd per 32 (value 2i is the low nibble of byte i) and
// transposed for 4 bits. The other widths unpack 8 codes at a time (int/pack.ts unpack8) against
// x as it is; unpack8 reads up to 6 bytes past a row's last group, which the host's row sections
// leave readable (src/serve run(): 8 bytes after each).

@inline function fastRun(bits: i32, run: i32): bool {
  return bits == 4 ? (run & 31) == 0 : bits == 8 ? (run & 15) == 0 : (run & 7) == 0;
}

// Partial sums of one run's codes at q with the reordered x at xr.
@inline function dotRunSimd(q: usize, run: i32, bits: i32, signed: bool, xr: usize): v128 {
  let a = f32x4.splat(0);
  let b = f32x4.splat(0);
  if (bits == 4) {
    for (let i = 0; i < run; i += 32) {
      const v = v128.load(q + (<usize>i >> 1));
      const xi = xr + (<usize>i << 2);
      a = f32x4.add(a, signed ? dotS4(v, 0, xi) : dotU4(v, 0, xi));
      b = f32x4.add(b, signed ? dotS4(v, 1, xi + 64) : dotU4(v, 1, xi + 64));
    }
  } else if (bits != 8) {
    const t = unpackTable(bits);
    const idx = v128.load(t);
    const mul = v128.load(t, 16);
    for (let i = 0; i < run; i += 8) {
      const c = unpack8(q + ((<usize>i * <usize>bits) >> 3), idx, mul, 16 - bits, signed);
      const xi = xr + (<usize>i << 2);
      a = f32x4.add(a, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(c)), v128.load(xi)));
      b = f32x4.add(b, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(c)), v128.load(xi, 16)));
    }
  } else {
    let i = 0;
    for (; i + 32 <= run; i += 32) {
      const xi = xr + (<usize>i << 2);
      a = f32x4.add(a, signed ? dotS8(v128.load(q + <usize>i), xi) : dotU8(v128.load(q + <usize>i), xi));
      b = f32x4.add(b, signed ? dotS8(v128.load(q + <usize>i, 16), xi + 64) : dotU8(v128.load(q + <usize>i, 16), xi + 64));
    }
    if (i < run) a = f32x4.add(a, signed ? dotS8(v128.load(q + <usize>i), xr + (<usize>i << 2)) : dotU8(v128.load(q + <usize>i), xr + (<usize>i << 2)));
  }
  return f32x4.add(a, b);
}

// x reordered for the fast path, into the scratch after the x sums.
@inline function fastX(bits: i32, x: usize, rowLen: i32, args: usize): usize {
  if (bits != 4 && bits != 8) return x;
  const xr = (argU32(args, A_SCRATCH) + (<usize>(rowLen >> 4) << 2) + 15) & ~(<usize>15);
  if (bits == 4) evenOddX(x, rowLen, xr, true);
  else transposeX16(x, rowLen, xr);
  return xr;
}

export function intsym_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  const bits = argI32(args, A_BITS);
  const flags = argI32(args, A_FLAGS);
  const scales = argU32(args, A_SCALES);
  const rowBytes = (<usize>rowLen * <usize>bits) >> 3;
  const run = flags & (FLAG_PER_TENSOR | FLAG_PER_CHANNEL) ? rowLen : argI32(args, A_GROUP);
  const nrun = rowLen / run;
  const tscale = flags & FLAG_PER_TENSOR ? load<f32>(argU32(args, A_AUX)) : 0;
  if (ASC_FEATURE_SIMD && fastRun(bits, run)) {
    const xr = fastX(bits, x, rowLen, args);
    for (let r = 0; r < nrows; r++) {
      let a = f32x4.splat(0);
      for (let j = 0; j < nrun; j++) {
        const s = flags & FLAG_PER_TENSOR ? tscale : load<f32>(scales + ((<usize>r * <usize>nrun + <usize>j) << 2));
        const q = w + <usize>r * rowBytes + ((<usize>j * <usize>run * <usize>bits) >> 3);
        a = f32x4.add(a, f32x4.mul(dotRunSimd(q, run, bits, true, xr + ((<usize>j * <usize>run) << 2)), f32x4.splat(s)));
      }
      store<f32>(y + (<usize>r << 2), hsum(a));
    }
    return;
  }
  for (let r = 0; r < nrows; r++) {
    rowBegin();
    for (let j = 0; j < nrun; j++) {
      const s = flags & FLAG_PER_TENSOR ? tscale : load<f32>(scales + ((<usize>r * <usize>nrun + <usize>j) << 2));
      const q = w + <usize>r * rowBytes + ((<usize>j * <usize>run * <usize>bits) >> 3);
      rowAddScalar(s * dotRun(q, run, bits, true, x + ((<usize>j * <usize>run) << 2)));
    }
    store<f32>(y + (<usize>r << 2), rowEnd());
  }
}

// Sum of x over group j (g values), from the per-16 sums xs: what the group's bias multiplies.
@inline function groupSum(xs: usize, j: i32, g: i32): f32 {
  let xg: f32 = 0;
  for (let t = 0; t < g >> 4; t++) xg += load<f32>(xs + ((<usize>(j * (g >> 4) + t)) << 2));
  return xg;
}

export function affine_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  const bits = argI32(args, A_BITS);
  const g = argI32(args, A_GROUP);
  const scales = argU32(args, A_SCALES);
  const biases = argU32(args, A_BIASES);
  const ng = rowLen / g;
  const groupBytes = (<usize>g * <usize>bits) >> 3;
  const flags = argI32(args, A_FLAGS);
  const xs = xSums16(x, rowLen, args);
  if (ASC_FEATURE_SIMD && fastRun(bits, g)) {
    const xr = fastX(bits, x, rowLen, args);
    for (let r = 0; r < nrows; r++) {
      let a = f32x4.splat(0);
      let bx: f32 = 0;
      for (let j = 0; j < ng; j++) {
        const k = <usize>r * <usize>ng + <usize>j;
        const s = storedScale(scales, k, flags);
        const b = storedScale(biases, k, flags);
        const xg = groupSum(xs, j, g);
        a = f32x4.add(a, f32x4.mul(dotRunSimd(w + k * groupBytes, g, bits, false, xr + ((<usize>j * <usize>g) << 2)), f32x4.splat(s)));
        bx += b * xg;
      }
      store<f32>(y + (<usize>r << 2), hsum(a) + bx);
    }
    return;
  }
  for (let r = 0; r < nrows; r++) {
    rowBegin();
    for (let j = 0; j < ng; j++) {
      const k = <usize>r * <usize>ng + <usize>j;
      const s = storedScale(scales, k, flags);
      const b = storedScale(biases, k, flags);
      const xg = groupSum(xs, j, g);
      const xj = x + ((<usize>j * <usize>g) << 2);
      rowAddScalar(s * dotRun(w + k * groupBytes, g, bits, false, xj) + b * xg);
    }
    store<f32>(y + (<usize>r << 2), rowEnd());
  }
}

// ---- several positions (see gguf-matmul.ts matmul32) -----------------------------------------
// A block of rows' codes is converted to f32 once (4 bytes a value), then each position runs the
// matvec's operations on them (the fast path's dotRunSimd through gguf-batch.ts dotF; otherwise
// dotRun's slices of dotI32 and rowAddScalar / rowEnd's sum), so every result keeps matvec's
// bits. The scalar build runs matvec per position.
// Scratch: [per position: x sums per group (affine), x reordered (fast path)][the block's codes
// as f32][its rows' scales as f32][affine: their biases as f32].

// Fast path: converts `n` values of codes at q (whole runs) to f32 at dst in dotRunSimd's lanes
// (at the offsets of the reordered x).
@inline function decodeRun(q: usize, n: i32, bits: i32, signed: bool, dst: usize): void {
  if (bits == 4) {
    for (let i = 0; i < n; i += 32) {
      const v = v128.load(q + (<usize>i >> 1));
      const o = dst + (<usize>i << 2);
      if (signed) {
        put4(o, nibS(v, 0), nibS(v, 2), nibS(v, 4), nibS(v, 6));
        put4(o + 64, nibS(v, 1), nibS(v, 3), nibS(v, 5), nibS(v, 7));
      } else {
        put4(o, nibU(v, 0), nibU(v, 2), nibU(v, 4), nibU(v, 6));
        put4(o + 64, nibU(v, 1), nibU(v, 3), nibU(v, 5), nibU(v, 7));
      }
    }
  } else if (bits == 8) {
    for (let i = 0; i < n; i += 16) {
      const v = v128.load(q + <usize>i);
      const o = dst + (<usize>i << 2);
      if (signed) putS8(o, v);
      else putU8(o, v);
    }
  } else {
    const t = unpackTable(bits);
    const idx = v128.load(t);
    const mul = v128.load(t, 16);
    for (let i = 0; i < n; i += 8) {
      const c = unpack8(q + ((<usize>i * <usize>bits) >> 3), idx, mul, 16 - bits, signed);
      const o = dst + (<usize>i << 2);
      v128.store(o, f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(c)));
      v128.store(o, f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(c)), 16);
    }
  }
}

// dotRunSimd on converted codes c (4 and 8 bits alike: 16 values a 64-byte group).
@inline function dotRunF(c: usize, run: i32, bits: i32, xr: usize): v128 {
  let a = f32x4.splat(0);
  let b = f32x4.splat(0);
  if (bits != 4 && bits != 8) {
    for (let i = 0; i < run; i += 8) {
      const o = <usize>i << 2;
      a = f32x4.add(a, f32x4.mul(v128.load(c + o), v128.load(xr + o)));
      b = f32x4.add(b, f32x4.mul(v128.load(c + o, 16), v128.load(xr + o, 16)));
    }
    return f32x4.add(a, b);
  }
  let i = 0;
  for (; i + 32 <= run; i += 32) {
    const o = <usize>i << 2;
    a = f32x4.add(a, dotF(c + o, xr + o));
    b = f32x4.add(b, dotF(c + o + 64, xr + o + 64));
  }
  if (i < run) a = f32x4.add(a, dotF(c + (<usize>i << 2), xr + (<usize>i << 2)));
  return f32x4.add(a, b);
}

// Other runs: the run's codes unpacked as dotRun does (slices of SLICE from the run's start) and
// converted to f32 in value order.
function decodeSlow(q: usize, run: i32, bits: i32, signed: bool, dst: usize): void {
  for (let i = 0; i < run; i += SLICE) {
    const m = min(SLICE, run - i);
    unpackCodes(q + ((<usize>i * <usize>bits) >> 3), m, bits, signed, I32BUF);
    for (let k = 0; k < m; k++) store<f32>(dst + (<usize>(i + k) << 2), <f32>load<i32>(I32BUF + (<usize>k << 2)));
  }
}
// dotRun on converted codes: dotI32 per slice, the slices' sums added in order.
function dotRunSlow(c: usize, run: i32, x: usize): f32 {
  let t: f32 = 0;
  for (let i = 0; i < run; i += SLICE) {
    const m = min(SLICE, run - i);
    const ci = c + (<usize>i << 2);
    const xi = x + (<usize>i << 2);
    let a = f32x4.splat(0);
    let k = 0;
    for (; k + 4 <= m; k += 4) a = f32x4.add(a, f32x4.mul(v128.load(ci + (<usize>k << 2)), v128.load(xi + (<usize>k << 2))));
    let s = hsum(a);
    for (; k < m; k++) s += load<f32>(ci + (<usize>k << 2)) * load<f32>(xi + (<usize>k << 2));
    t += s;
  }
  return t;
}

function matmulInt(affine: bool, w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  if (!ASC_FEATURE_SIMD) {
    for (let b = 0; b < batch; b++) {
      const xb = x + ((<usize>b * <usize>rowLen) << 2);
      const yb = y + ((<usize>b * <usize>yStride) << 2);
      if (affine) affine_matvec(w, nrows, rowLen, xb, yb, args);
      else intsym_matvec(w, nrows, rowLen, xb, yb, args);
    }
    return;
  }
  const bits = argI32(args, A_BITS);
  const flags = argI32(args, A_FLAGS);
  const run = affine ? argI32(args, A_GROUP) : flags & (FLAG_PER_TENSOR | FLAG_PER_CHANNEL) ? rowLen : argI32(args, A_GROUP);
  const fast = fastRun(bits, run);
  const nrun = rowLen / run;
  const rowBytes = (<usize>rowLen * <usize>bits) >> 3;
  const xBytes = <usize>rowLen << 2;
  // affine: each position's x sums per group (groupSum over its sums per 16, formed in place);
  // the fast path with 4 or 8 bits: each position's x reordered
  const reorder = fast && (bits == 4 || bits == 8);
  const sumBytes = affine ? ((<usize>(rowLen >> 4) << 2) + 15) & ~(<usize>15) : 0;
  const posBytes = sumBytes + (reorder ? xBytes : 0);
  const pos = (argU32(args, A_SCRATCH) + 15) & ~(<usize>15);
  for (let b = 0; b < batch; b++) {
    const xb = x + <usize>b * xBytes;
    const p = pos + <usize>b * posBytes;
    if (affine) {
      sums16(xb, rowLen, p);
      for (let j = 0; j < nrun; j++) store<f32>(p + (<usize>j << 2), groupSum(p, j, run));
    }
    if (reorder) {
      if (bits == 4) evenOddX(xb, rowLen, p + sumBytes, true);
      else transposeX16(xb, rowLen, p + sumBytes);
    }
  }
  const cf = pos + <usize>batch * posBytes;
  const per = max(1, <i32>(<usize>(256 << 10) / xBytes));
  const runBytes = <usize>nrun << 2;
  const sc = cf + <usize>per * xBytes;
  const bs = sc + <usize>per * runBytes;
  const scales = argU32(args, A_SCALES);
  const biases = argU32(args, A_BIASES);
  const tscale = flags & FLAG_PER_TENSOR ? load<f32>(argU32(args, A_AUX)) : 0;
  for (let r0 = 0; r0 < nrows; r0 += per) {
    const n = min(per, nrows - r0);
    for (let r = 0; r < n; r++) {
      const q = w + <usize>(r0 + r) * rowBytes;
      const c = cf + <usize>r * xBytes;
      if (fast) decodeRun(q, rowLen, bits, !affine, c);
      for (let j = 0; j < nrun; j++) {
        if (!fast) decodeSlow(q + ((<usize>j * <usize>run * <usize>bits) >> 3), run, bits, !affine, c + ((<usize>j * <usize>run) << 2));
        const k = <usize>(r0 + r) * <usize>nrun + <usize>j;
        const at = <usize>r * runBytes + (<usize>j << 2);
        if (affine) {
          store<f32>(sc + at, storedScale(scales, k, flags));
          store<f32>(bs + at, storedScale(biases, k, flags));
        } else {
          store<f32>(sc + at, flags & FLAG_PER_TENSOR ? tscale : load<f32>(scales + (k << 2)));
        }
      }
    }
    for (let b = 0; b < batch; b++) {
      const p = pos + <usize>b * posBytes;
      const yb = y + ((<usize>b * <usize>yStride + <usize>r0) << 2);
      for (let r = 0; r < n; r++) {
        const c = cf + <usize>r * xBytes;
        const sr = sc + <usize>r * runBytes;
        const br = bs + <usize>r * runBytes;
        if (fast) {
          const xr = reorder ? p + sumBytes : x + <usize>b * xBytes;
          let a = f32x4.splat(0);
          for (let j = 0; j < nrun; j++) {
            const o = (<usize>j * <usize>run) << 2;
            a = f32x4.add(a, f32x4.mul(dotRunF(c + o, run, bits, xr + o), v128.load32_splat(sr + (<usize>j << 2))));
          }
          if (affine) {
            // affine_matvec's bias term, summed in the same order
            let bx: f32 = 0;
            for (let j = 0; j < nrun; j++) bx += load<f32>(br + (<usize>j << 2)) * load<f32>(p + (<usize>j << 2));
            store<f32>(yb + (<usize>r << 2), hsum(a) + bx);
          } else {
            store<f32>(yb + (<usize>r << 2), hsum(a));
          }
        } else {
          // rowBegin, rowAddScalar per run, rowEnd (its empty lane sum and min term)
          const xb = x + <usize>b * xBytes;
          let acc: f32 = 0;
          for (let j = 0; j < nrun; j++) {
            const o = (<usize>j * <usize>run) << 2;
            const t = load<f32>(sr + (<usize>j << 2)) * dotRunSlow(c + o, run, xb + o);
            acc += affine ? t + load<f32>(br + (<usize>j << 2)) * load<f32>(p + (<usize>j << 2)) : t;
          }
          acc += hsum(f32x4.splat(0));
          store<f32>(yb + (<usize>r << 2), acc - <f32>0);
        }
      }
    }
  }
}
export function intsym_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmulInt(false, w, nrows, rowLen, x, y, args, batch, yStride);
}
export function affine_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmulInt(true, w, nrows, rowLen, x, y, args, batch, yStride);
}

