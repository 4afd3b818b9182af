import { formats } from '../src/formats/registry.js';
import { loadKernels } from '../src/kernels/loader.js';
import { Resident, ROW } from './resident.js';
import { weightData } from './util.js';
const k = await loadKernels('wasm-simd', 'bench');
const f = formats.get('iq4_nl')!;
const r = new Resident(k, f, 64, weightData(64 * ROW), {});
for (let i = 0; i < 20; i++) r.quantize(64);
