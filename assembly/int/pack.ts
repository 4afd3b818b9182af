// Code packing shared by the symmetric (intsym) and affine integer formats.
//
// Bit order, the same for every width b in 2..8: the codes of a row form ONE little-endian bit
// stream. Code i occupies stream bits [i*b, i*b + b), its least significant bit first, and
// stream bit k is bit (k & 7) of byte (k >> 3). Consequences per width:
//   b = 8: one code per byte.
//   b = 4: byte j = code 2j (low nibble) | code 2j+1 (high nibble).
//   b = 2: byte j = codes 4j..4j+3 at bits 0-1, 2-3, 4-5, 6-7.
//   b = 3: 8 codes in 3 bytes; code 2 straddles bytes 0/1 (bits 6-7 of byte 0, bit 0 of byte 1),
//          code 5 straddles bytes 1/2.
//   b = 5: 8 codes in 5 bytes; b = 6: 4 codes in 3 bytes; b = 7: 8 codes in 7 bytes.
// Read as little-endian u32 words, widths that divide 32 (2, 4, 8) give exactly MLX's packing
// (code i of a word at bits b*i). Every group of 32 codes fills whole bytes (32*b/8), so groups
// start on byte boundaries; a row of n codes needs n*b to be a multiple of 8 (the registry's
// blockSize guarantees it).
// Symmetric codes are stored as b-bit two's complement, affine codes as unsigned b-bit values.

// Packs n codes (i32 array at `codes`) into dst; n*bits must be a multiple of 8.
export function packCodes(codes: usize, n: i32, bits: i32, dst: usize): void {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    if (bits == 8) {
      const m = i32x4.splat(0xff);
      for (; i + 16 <= n; i += 16) {
        const p = codes + (<usize>i << 2);
        const a = i16x8.narrow_i32x4_u(v128.and(v128.load(p), m), v128.and(v128.load(p, 16), m));
        const b = i16x8.narrow_i32x4_u(v128.and(v128.load(p, 32), m), v128.and(v128.load(p, 48), m));
        v128.store(dst + <usize>i, i8x16.narrow_i16x8_u(a, b));
      }
    } else if (bits == 4) {
      const m = i32x4.splat(0x0f);
      for (; i + 16 <= n; i += 16) {
        const p = codes + (<usize>i << 2);
        const a = i16x8.narrow_i32x4_u(v128.and(v128.load(p), m), v128.and(v128.load(p, 16), m));
        const b = i16x8.narrow_i32x4_u(v128.and(v128.load(p, 32), m), v128.and(v128.load(p, 48), m));
        // Bytes c0 c1 c2 ... seen as u16 lanes c0 | c1 << 8: fold the high byte into bits 4..7.
        const w = i8x16.narrow_i16x8_u(a, b);
        const pair = v128.or(v128.and(w, i16x8.splat(0x0f)), v128.and(i16x8.shr_u(w, 4), i16x8.splat(0xf0)));
        v128.store64_lane(dst + <usize>(i >> 1), i8x16.narrow_i16x8_u(pair, pair), 0);
      }
    }
  }
  if (bits == 8) {
    for (; i < n; i++) store<u8>(dst + <usize>i, <u8>load<i32>(codes + (<usize>i << 2)));
    return;
  }
  if (bits == 4) {
    for (; i < n; i += 2) {
      const a = load<i32>(codes + (<usize>i << 2)) & 15;
      const b = load<i32>(codes + (<usize>i << 2) + 4) & 15;
      store<u8>(dst + <usize>(i >> 1), <u8>(a | (b << 4)));
    }
    return;
  }
  const mask: u32 = (<u32>1 << bits) - 1;
  const m64 = <u64>mask;
  // 8 codes fill exactly `bits` bytes: build them in one u64 and store those bytes.
  for (; i + 8 <= n; i += 8) {
    const p = codes + (<usize>i << 2);
    let w: u64 = 0;
    for (let t = 0; t < 8; t++) w |= (<u64>load<u32>(p + (<usize>t << 2)) & m64) << (<u64>(t * bits));
    const o = dst + ((<usize>i * <usize>bits) >> 3);
    if (bits == 2) {
      store<u16>(o, <u16>w);
    } else if (bits == 3) {
      store<u16>(o, <u16>w);
      store<u8>(o, <u8>(w >> 16), 2);
    } else if (bits == 5) {
      store<u32>(o, <u32>w);
      store<u8>(o, <u8>(w >> 32), 4);
    } else if (bits == 6) {
      store<u32>(o, <u32>w);
      store<u16>(o, <u16>(w >> 32), 4);
    } else {
      store<u32>(o, <u32>w);
      store<u16>(o, <u16>(w >> 32), 4);
      store<u8>(o, <u8>(w >> 48), 6);
    }
  }
  let acc: u32 = 0;
  let nb: i32 = 0;
  let o = dst + ((<usize>i * <usize>bits) >> 3);
  for (; i < n; i++) {
    acc |= (<u32>load<i32>(codes + (<usize>i << 2)) & mask) << nb;
    nb += bits;
    while (nb >= 8) {
      store<u8>(o++, <u8>acc);
      acc >>= 8;
      nb -= 8;
    }
  }
}

// 16 byte codes -> 16 i32 at p, sign- or zero-extended.
@inline function widen16(c: v128, signed: bool, p: usize): void {
  if (signed) {
    const lo = i16x8.extend_low_i8x16_s(c);
    const hi = i16x8.extend_high_i8x16_s(c);
    v128.store(p, i32x4.extend_low_i16x8_s(lo));
    v128.store(p, i32x4.extend_high_i16x8_s(lo), 16);
    v128.store(p, i32x4.extend_low_i16x8_s(hi), 32);
    v128.store(p, i32x4.extend_high_i16x8_s(hi), 48);
  } else {
    const lo = i16x8.extend_low_i8x16_u(c);
    const hi = i16x8.extend_high_i8x16_u(c);
    v128.store(p, i32x4.extend_low_i16x8_u(lo));
    v128.store(p, i32x4.extend_high_i16x8_u(lo), 16);
    v128.store(p, i32x4.extend_low_i16x8_u(hi), 32);
    v128.store(p, i32x4.extend_high_i16x8_u(hi), 48);
  }
}

// SIMD unpacking of the other widths, 8 codes (exactly `bits` bytes) at a time: a swizzle puts
// the two bytes that hold code k (bytes (k*b) >> 3 and the next) into 16-bit lane k, a multiply by
// 2^(16 - off - b) (off = (k*b) & 7; a per-lane left shift, which wasm SIMD lacks) brings the
// code's top bit to bit 15, and a shift right by 16 - b (arithmetic for signed codes) leaves it
// extended. Per width b = 2..7: the swizzle indices (16 bytes) and the multipliers (8 x u16).
const UNPACK = memory.data(6 * 32, 16);
for (let b = 2; b < 8; b++) {
  const t = UNPACK + <usize>((b - 2) * 32);
  for (let k = 0; k < 8; k++) {
    const lo = (k * b) >> 3;
    store<u8>(t + <usize>(2 * k), <u8>lo);
    store<u8>(t + <usize>(2 * k + 1), <u8>(lo + 1));
    const m: i32 = 1 << (16 - ((k * b) & 7) - b);
    store<u16>(t + 16 + <usize>(2 * k), <u16>m);
  }
}
@inline export function unpackTable(bits: i32): usize {
  return UNPACK + <usize>((bits - 2) * 32);
}
// The 8 codes whose `bits` bytes start at p, as i16 lanes (SIMD build, widths 2, 3, 5, 6, 7;
// idx / mul from unpackTable, sh = 16 - bits). Reads 8 bytes from p: the caller makes sure that
// 8 - bits bytes after the group can be read.
@inline export function unpack8(p: usize, idx: v128, mul: v128, sh: i32, signed: bool): v128 {
  const w = i16x8.mul(i8x16.swizzle(v128.load64_zero(p), idx), mul);
  return signed ? i16x8.shr_s(w, sh) : i16x8.shr_u(w, sh);
}

// Unpacks n codes starting at stream bit 0 of src into i32s at dst, sign-extending when `signed`.
export function unpackCodes(src: usize, n: i32, bits: i32, signed: bool, dst: usize): void {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    if (bits != 4 && bits != 8) {
      const t = unpackTable(bits);
      const idx = v128.load(t);
      const mul = v128.load(t, 16);
      const sh = 16 - bits;
      // 8 bytes are read from each group's first: stop where that would pass the last byte
      const end = (<usize>n * <usize>bits) >> 3;
      for (; i + 8 <= n && ((<usize>i * <usize>bits) >> 3) + 8 <= end; i += 8) {
        const c = unpack8(src + ((<usize>i * <usize>bits) >> 3), idx, mul, sh, signed);
        const p = dst + (<usize>i << 2);
        v128.store(p, i32x4.extend_low_i16x8_s(c));
        v128.store(p, i32x4.extend_high_i16x8_s(c), 16);
      }
    } else if (bits == 8) {
      for (; i + 16 <= n; i += 16) {
        widen16(v128.load(src + <usize>i), signed, dst + (<usize>i << 2));
      }
    } else if (bits == 4) {
      for (; i + 16 <= n; i += 16) {
        const v = v128.load64_zero(src + <usize>(i >> 1));
        const lo = v128.and(v, i8x16.splat(0x0f));
        const hi = i8x16.shr_u(v, 4);
        const c = i8x16.shuffle(lo, hi, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const p = dst + (<usize>i << 2);
        if (signed) widen16(i8x16.shr_s(i8x16.shl(c, 4), 4), true, p); // sign-extend the nibbles
        else widen16(c, false, p);
      }
    }
  }
  const mask: u32 = (<u32>1 << bits) - 1;
  const sh = 32 - bits;
  for (; i < n; i++) {
    const bit = i * bits;
    // Two bytes always hold a code of <= 8 bits wherever it starts; the second may be past the
    // row's last byte only when the code fits in the first, so read it only when needed.
    const byte = src + <usize>(bit >> 3);
    const off = bit & 7;
    let w = <u32>load<u8>(byte);
    if (off + bits > 8) w |= <u32>load<u8>(byte, 1) << 8;
    const u = (w >> off) & mask;
    store<i32>(dst + (<usize>i << 2), signed ? (<i32>(u << sh)) >> sh : <i32>u);
  }
}
