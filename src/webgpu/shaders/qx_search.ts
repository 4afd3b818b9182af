// The §13.1 QX search (make_qx_quants, rmse_type 1; assembly/gguf/qx_search.ts, scalar build) in
// WGSL over n values: Q3_K's sub-blocks and sub-scales (16), Q4_0 and Q5_0 blocks with
// importances (32). The including shader fills XV (values) and WV (weights).
export function qxSearch(n: 16 | 32): string {
  return /* wgsl */ `
var<private> XV: array<u32, ${n}>;  // the values a search runs on
var<private> WV: array<u32, ${n}>;  // their weights
var<private> LQ: array<u32, ${n}>;  // its codes, l + nmax

// §13.1 make_qx_quants (rmse_type 1) on XV, WV: codes l + nmax into LQ, returns the scale.
// Trial -10 is the initial iscale -nmax/vmax; trials -9..-1, 1..9 are -(nmax + 0.1*k)/vmax.
fn qx(nmax: i32) -> u32 {
  var vmax = 0u;
  for (var i = 0u; i < ${n}u; i = i + 1u) { vmax = absmax_step(vmax, XV[i]); }
  if (f_lt(vmax & ABS, GROUP_EPS)) {
    for (var i = 0u; i < ${n}u; i = i + 1u) { LQ[i] = 0u; }
    return 0u;
  }
  let fnmax = f_from_i(nmax);
  var win = 0u;
  var scale = 0u;
  var best = 0u;
  for (var k = -10; k <= 9; k = k + 1) {
    if (k == 0) { continue; }
    var u = fnmax;
    if (k > -10) { u = f_add(u, f_mul(0x3dcccccdu, f_from_i(k))); }
    let iscale = f_div(u ^ SIGN, vmax);
    var slx = 0u;
    var sl2 = 0u;
    for (var i = 0u; i < ${n}u; i = i + 1u) {
      let l = f_from_i(clamp(nearest_int(f_mul(iscale, XV[i])), -nmax, nmax - 1));
      slx = f_add(slx, f_mul(f_mul(WV[i], XV[i]), l));
      sl2 = f_add(sl2, f_mul(f_mul(WV[i], l), l));
    }
    if (k == -10 || (f_gt(sl2, 0u) && f_gt(f_mul(slx, slx), f_mul(best, sl2)))) {
      win = iscale;
      // the initial trial with sum w*l*l = 0 has scale 0
      scale = select(f_div(slx, sl2), 0u, k == -10 && f_eq(sl2, 0u));
      best = f_mul(scale, slx);
    }
  }
  for (var i = 0u; i < ${n}u; i = i + 1u) { LQ[i] = u32(clamp(nearest_int(f_mul(win, XV[i])), -nmax, nmax - 1) + nmax); }
  return scale;
}
`;
}
