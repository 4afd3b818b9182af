// Quantization plans: roles, rules, presets, size estimates and budget recommendations.
export { detectRole, useMoreBits, ROLES, type Role, type RoleKind, type TensorRole } from './roles.js';
export {
  PROTECT_CLASSES, DEFAULT_PROTECT,
  type Plan, type PlanRule, type Scheme, type SchemeOrKeep, type ProtectClass, type LayerSelector, type TensorDesc,
  type PlannedTensor, type PlanProblem, type ResolvedPlan, type ResolveOptions, type Severity,
} from './types.js';
export { normalizePlan, planFromJSON, planToJSON, planToJSONString, fromMaxText, parseRegex, type MaxTextLayerConfig } from './json.js';
export { resolvePlan, assertPlanOk, schemeLabel, GGUF_FALLBACK } from './plan.js';
export { registerPreset, listPresets, getPreset, LLAMA_FTYPE, PRESET_ALIASES, type Preset } from './presets.js';
export { estimatePlan, storedBytes, type SizeEstimate, type SizeBucket } from './estimate.js';
export { recommend, syntheticModel, type RecommendInput, type Recommendation, type RecommendTarget, type Candidate } from './recommend.js';
