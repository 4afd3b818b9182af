// The K-quant scale searches in WGSL (assembly/gguf/qkx_search.ts and searches.ts, scalar build): §13.3 QKX
// (make_qkx2/qkx3_quants, squared or absolute error) over one sub-block of n values, and §13.4
// QP (make_qp_quants) over a super-block's `subs` sub-scales or sub-mins. One generator for
// Q4_K/Q5_K (sub-blocks of 32, 8 sub-scales up to 63) and Q2_K (16, 16 up to 15): the shader
// that includes it fills XS and WS, and SC, MN, SW for QP. Each soft-float call is inlined where
// it is written (SwiftShader, and GPU compilers generally), so the code keeps one call site per
// step: the first codes of a search run as its trial -1, and the three a*b - c*d of a QKX trial
// share one loop.

const f32Bits = (v: number) => `0x${new Uint32Array(new Float32Array([v]).buffer)[0].toString(16).padStart(8, '0')}u`;

export function kSearch(n: 16 | 32, subs: 8 | 16, qpMax: 15 | 63): string {
  return /* wgsl */ `
var<private> XS: array<u32, ${n}>;  // the sub-block's values
var<private> XM: array<u32, ${n}>;  // XS - vmin for the current min
var<private> WS: array<u32, ${n}>;  // its weights
var<private> LA: array<u32, ${n}>;  // codes of the current trial
var<private> LB: array<u32, ${n}>;  // best codes so far
var<private> SC: array<u32, ${subs}>;   // sub-block scales
var<private> MN: array<u32, ${subs}>;   // sub-block mins, negated (the_min >= 0)
var<private> SW: array<u32, ${subs}>;   // sums of the importance weights per sub-block
var<private> QL: array<u32, ${2 * subs}>;  // QP codes (bytes): scales first, then mins

// Codes clamp(nearest_int(iscale * (x - vmin)), 0, nmax) into LA and their weighted sums
// (sum w*l, sum w*l*l, sum w*l*x), each left to right.
fn qkx_trial(iscale: u32, nmax: i32) -> vec3<u32> {
  var sl = 0u; var sl2 = 0u; var sxl = 0u;
  for (var i = 0u; i < ${n}u; i = i + 1u) {
    let l = clamp(nearest_int(f_mul(iscale, XM[i])), 0, nmax);
    LA[i] = u32(l);
    let fl = f_from_i(l);
    let wl = f_mul(WS[i], fl);
    sl = f_add(sl, wl);
    sl2 = f_add(sl2, f_mul(wl, fl));
    sxl = f_add(sxl, f_mul(wl, XS[i]));
  }
  return vec3<u32>(sl, sl2, sxl);
}

// sum w * (ts*l + tm - x)^2, or w * |ts*l + tm - x| (mad), over the codes in LA.
fn qkx_err(ts: u32, tm: u32, mad: bool) -> u32 {
  var e = 0u;
  for (var i = 0u; i < ${n}u; i = i + 1u) {
    let diff = f_sub(f_add(f_mul(ts, f_from_i(i32(LA[i]))), tm), XS[i]);
    e = f_add(e, f_mul(WS[i], select(f_mul(diff, diff), diff & ABS, mad)));
  }
  return e;
}

// §13.3 make_qkx2/qkx3_quants (squared or absolute error) on XS, WS: codes into LB; (scale, the_min).
fn qkx(nmax: i32, rmin: u32, rdelta: u32, nstep: i32, mad: bool) -> vec2<u32> {
  let fnmax = f_from_i(nmax);
  var vmin = XS[0];
  var vmax = vmin;
  var sum_w = 0u;
  var sum_x = 0u;
  for (var i = 0u; i < ${n}u; i = i + 1u) {
    let xi = XS[i];
    let wi = WS[i];
    if (f_lt(xi, vmin)) { vmin = xi; }
    if (f_gt(xi, vmax)) { vmax = xi; }
    let wx = f_mul(wi, xi);
    // The sums start from their first term (not 0 + it, which would turn -0 into +0).
    if (i == 0u) { sum_w = wi; sum_x = wx; } else { sum_w = f_add(sum_w, wi); sum_x = f_add(sum_x, wx); }
  }
  if (f_gt(vmin, 0u)) { vmin = 0u; }
  if (f_le(vmax, vmin)) {
    for (var i = 0u; i < ${n}u; i = i + 1u) { LB[i] = 0u; }
    return vec2<u32>(0u, vmin ^ SIGN);
  }
  var scale = 0u;
  var best = 0u;
  var xm_min = vmin ^ 1u; // XM is filled for this min
  // t = -1: the first codes, iscale = nmax/(vmax - vmin) with scale 1/iscale and min vmin, kept;
  // t = 0..nstep: iscale = (rmin + rdelta*t + nmax)/(vmax - vmin), whose least-squares
  // (scale, min) is kept when its error is smaller.
  for (var t = -1; t <= nstep; t = t + 1) {
    if (xm_min != vmin) {
      for (var i = 0u; i < ${n}u; i = i + 1u) { XM[i] = f_sub(XS[i], vmin); }
      xm_min = vmin;
    }
    var num = fnmax;
    if (t >= 0) { num = f_add(f_add(rmin, f_mul(rdelta, f_from_i(t))), fnmax); }
    let iscale = f_div(num, f_sub(vmax, vmin));
    let s = qkx_trial(iscale, nmax); // (sl, sl2, sxl)
    var ts: u32;
    var tm: u32;
    if (t < 0) {
      ts = f_div(F_ONE, iscale);
      tm = vmin;
    } else {
      // D = sum_w*sl2 - sl*sl, sum_w*sxl - sum_x*sl, sl2*sum_x - sl*sxl
      var a = array<u32, 6>(sum_w, s.y, sum_w, s.z, s.y, sum_x);
      var c = array<u32, 6>(s.x, s.x, sum_x, s.x, s.x, s.z);
      var r: array<u32, 3>;
      for (var k = 0u; k < 3u; k = k + 1u) { r[k] = f_sub(f_mul(a[2u * k], a[2u * k + 1u]), f_mul(c[2u * k], c[2u * k + 1u])); }
      if (!f_gt(r[0], 0u)) { continue; }
      ts = f_div(r[1], r[0]);
      tm = f_div(r[2], r[0]);
      if (f_gt(tm, 0u)) { tm = 0u; ts = f_div(s.z, s.y); }
    }
    let err = qkx_err(ts, tm, mad);
    if (t < 0 || f_lt(err, best)) {
      for (var i = 0u; i < ${n}u; i = i + 1u) { LB[i] = LA[i]; }
      best = err;
      scale = ts;
      vmin = tm;
    }
  }
  return vec2<u32>(scale, vmin ^ SIGN);
}

// §13.4 make_qp_quants (nmax ${qpMax}) over the ${subs} sub-scales (which 0) or sub-mins (1) with weights
// SW: codes (bytes, as the reference's stores wrap) into QL[${subs}*which..]; returns sumlx/suml2
// (any NaN as x86's default NaN).
fn qp(which: u32) -> u32 {
  let o = ${subs}u * which;
  var x: array<u32, ${subs}>;
  for (var i = 0u; i < ${subs}u; i = i + 1u) { x[i] = select(SC[i], MN[i], which == 1u); }
  let fnmax = ${f32Bits(qpMax)}; // ${qpMax}
  var vmax = 0u;
  for (var i = 0u; i < ${subs}u; i = i + 1u) { if (!f_gt(vmax, x[i])) { vmax = x[i]; } }
  if (f_eq(vmax, 0u)) {
    for (var i = 0u; i < ${subs}u; i = i + 1u) { QL[o + i] = 0u; }
    return 0u;
  }
  // k = 0: iscale = nmax/vmax, codes unclamped as bytes; k = 1..8: (0.1*t + nmax)/vmax for
  // t = -4..-1, 1..4 (t = 0 gives the same 63/vmax), codes min(${qpMax}, .), kept on a smaller error.
  var iscale = 0u;
  var best = 0u;
  for (var k = 0; k < 9; k = k + 1) {
    var t = 0;
    if (k > 0) { t = select(k - 5, k - 4, k > 4); }
    let is_t = f_div(f_add(f_mul(0x3dcccccdu, f_from_i(t)), fnmax), vmax);
    let sc = f_div(F_ONE, is_t);
    var err = 0u;
    for (var i = 0u; i < ${subs}u; i = i + 1u) {
      var l = nearest_int(f_mul(is_t, x[i]));
      if (k == 0) { l = l & 0xff; } else { l = min(${qpMax}, l); }
      let diff = f_sub(x[i], f_mul(sc, f_from_i(l)));
      err = f_add(err, f_mul(f_mul(SW[i], diff), diff));
    }
    if (k == 0 || f_lt(err, best)) { best = err; iscale = is_t; }
  }
  var sumlx = 0u;
  var suml2 = 0u;
  for (var i = 0u; i < ${subs}u; i = i + 1u) {
    let l = min(${qpMax}, nearest_int(f_mul(iscale, x[i])));
    QL[o + i] = u32(l) & 0xffu;
    let fl = f_from_i(l);
    sumlx = f_add(sumlx, f_mul(f_mul(SW[i], x[i]), fl));
    suml2 = f_add(suml2, f_mul(f_mul(SW[i], fl), fl));
  }
  for (var itry = 0; itry < 5; itry = itry + 1) {
    var changed = false;
    for (var i = 0u; i < ${subs}u; i = i + 1u) {
      let li = i32(QL[o + i]);
      let wx = f_mul(SW[i], x[i]);
      let fli = f_from_i(li);
      var slx = f_sub(sumlx, f_mul(wx, fli));
      var sl2 = f_sub(suml2, f_mul(f_mul(SW[i], fli), fli));
      if (!(f_gt(slx, 0u) && f_gt(sl2, 0u))) { continue; }
      let nl = min(${qpMax}, nearest_int(f_div(f_mul(x[i], sl2), slx)));
      if (nl == li) { continue; }
      let fl = f_from_i(nl);
      slx = f_add(slx, f_mul(wx, fl));
      sl2 = f_add(sl2, f_mul(f_mul(SW[i], fl), fl));
      if (f_gt(f_mul(f_mul(slx, slx), suml2), f_mul(f_mul(sumlx, sumlx), sl2))) {
        QL[o + i] = u32(nl) & 0xffu;
        sumlx = slx;
        suml2 = sl2;
        changed = true;
      }
    }
    if (!changed) { break; }
  }
  let r = f_div(sumlx, suml2);
  if (is_nan(r)) { return F_QNAN | SIGN; }
  return r;
}
`;
}
