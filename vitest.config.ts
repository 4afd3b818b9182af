import { existsSync } from 'node:fs';
import { defineConfig } from 'vitest/config';

// WebGPU tests (test/webgpu) run Dawn (the `webgpu` package) on SwiftShader, which Debian's chromium
// ships with its own Vulkan loader. The loader path must be in the environment the test processes
// start with (the dynamic linker reads LD_LIBRARY_PATH once, at process start).
const CHROMIUM = '/usr/lib/chromium';
const ICD = `${CHROMIUM}/vk_swiftshader_icd.json`;
const gpuEnv: Record<string, string> = existsSync(ICD)
  ? {
    VK_ICD_FILENAMES: process.env.VK_ICD_FILENAMES ?? ICD,
    LD_LIBRARY_PATH: [process.env.LD_LIBRARY_PATH, CHROMIUM].filter(Boolean).join(':'),
  }
  : {};

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    env: gpuEnv,
  },
});
