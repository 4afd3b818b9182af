// llama.cpp's own quantizers as a native baseline measured beside ours in one process
// (bench/native.ts). The library is a released build: libggml-base.so (the reference quantizers
// that ggml_quantize_chunk, and so llama-quantize, runs) and libggml-cpu-haswell.so (the AVX2
// CPU backend) from node-llama-cpp's Linux x64 prebuilt package, fetched with `npm pack` on first
// use into node_modules/.cache and checked against the registry's pinned SHA-512. `--lib
// path/to/libggml-base.so` times another build instead (e.g. one made with -march=native; its
// libggml-cpu.so is looked for beside it). Called through koffi (a maintained FFI for Node).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE = '@node-llama-cpp/linux-x64';
const VERSION = '3.22.1';
const INTEGRITY = 'sha512-5uCCDNqWCNfaAm8aR/Uzxbo4HBpKgNF91kCHPepKhgMgV2OAmatoefbOlMihsqCiH2Od35E/eUHQCFbfRBJuOg==';
const BINS = 'package/bins/linux-x64';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface NativeLibs {
  /** What was loaded, for the printed table. */
  origin: string;
  base: string;
  /** The CPU backend with its AVX2 from_float kernels, where present. */
  cpu?: string;
}

/** The released build, fetched once into node_modules/.cache. */
function released(): NativeLibs {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(`[bench:native] the released llama.cpp build is for Linux x64 (this is ${process.platform} ${process.arch}); pass --lib path/to/libggml-base.so`);
  }
  const dir = join(ROOT, 'node_modules/.cache/webquant', `llamacpp-linux-x64-${VERSION}`);
  const libs = { origin: `llama.cpp from ${PACKAGE}@${VERSION} (release build, GCC)`, base: join(dir, 'libggml-base.so'), cpu: join(dir, 'libggml-cpu-haswell.so') };
  if (existsSync(libs.base) && existsSync(libs.cpu)) return libs;
  const tmp = `${dir}.tmp`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  console.error(`fetching ${PACKAGE}@${VERSION} with npm pack ...`);
  const name = execFileSync('npm', ['pack', `${PACKAGE}@${VERSION}`, '--pack-destination', tmp, '--silent'], { encoding: 'utf8' }).trim().split('\n').pop()!;
  const tgz = join(tmp, name);
  const digest = `sha512-${createHash('sha512').update(readFileSync(tgz)).digest('base64')}`;
  if (digest !== INTEGRITY) throw new Error(`[bench:native] ${tgz}: SHA-512 ${digest}, expected ${INTEGRITY}`);
  execFileSync('tar', ['xzf', tgz, '-C', tmp, '--strip-components=3', `${BINS}/libggml-base.so`, `${BINS}/libggml-cpu-haswell.so`]);
  rmSync(tgz);
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return libs;
}

export function nativeLibs(lib?: string): NativeLibs {
  if (!lib) return released();
  if (!existsSync(lib)) throw new Error(`[bench:native] --lib ${lib}: no such file`);
  const cpu = join(dirname(lib), 'libggml-cpu.so');
  return { origin: `llama.cpp from ${lib}`, base: lib, cpu: existsSync(cpu) ? cpu : undefined };
}

type Koffi = typeof import('koffi');
type NativeFn = (...args: unknown[]) => unknown;

export interface Ggml {
  /** quantize_<t>(src, dst, nrows, n_per_row, imatrix): what ggml_quantize_chunk calls. */
  quantize(t: string): NativeFn;
  /** quantize_row_<t>_ref(src, dst, k), or undefined where the library has none. */
  quantizeRef(t: string): NativeFn | undefined;
  /** dequantize_row_<t>(src, dst, k). */
  dequantize(t: string): NativeFn;
  /** The CPU backend's quantize_row_<t>(src, dst, k) (SIMD where the build has it). */
  cpuQuantize(t: string): NativeFn | undefined;
  /**
   * ggml_quantize_chunk(type, src, dst, start, nrows, n_per_row, imatrix): llama-quantize's entry,
   * which also builds the IQ types' search tables (ggml_quantize_init) before their quantizers run.
   */
  quantizeChunk: NativeFn;
}

export function loadGgml(libs: NativeLibs): Ggml {
  const koffi = createRequire(import.meta.url)('koffi') as Koffi;
  const base = koffi.load(libs.base);
  const cpu = libs.cpu ? koffi.load(libs.cpu) : undefined;
  // Typed arrays are passed as pointers to their bytes (no copy).
  const sym = (lib: ReturnType<Koffi['load']>, decl: string): NativeFn | undefined => {
    try {
      return lib.func(decl) as NativeFn;
    } catch {
      return undefined;
    }
  };
  const need = (f: NativeFn | undefined, what: string) => {
    if (!f) throw new Error(`[bench:native] ${libs.base} has no ${what}`);
    return f;
  };
  return {
    quantize: (t) => need(sym(base, `size_t quantize_${t}(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *imatrix)`), `quantize_${t}`),
    quantizeRef: (t) => sym(base, `void quantize_row_${t}_ref(const float *src, void *dst, int64_t k)`),
    dequantize: (t) => need(sym(base, `void dequantize_row_${t}(const void *src, float *dst, int64_t k)`), `dequantize_row_${t}`),
    cpuQuantize: (t) => (cpu ? sym(cpu, `void quantize_row_${t}(const float *src, void *dst, int64_t k)`) : undefined),
    quantizeChunk: need(sym(base, 'size_t ggml_quantize_chunk(int type, const float *src, void *dst, int64_t start, int64_t nrows, int64_t n_per_row, const float *imatrix)'), 'ggml_quantize_chunk'),
  };
}
